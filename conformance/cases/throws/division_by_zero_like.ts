const o: any = null;
return o.field;
