return [await tools["__proto__"]({}), await tools["constructor"]({}), await tools["my-tool"]({})]
