const shared = { v: 1 };
return [shared, shared, { inner: shared }];
