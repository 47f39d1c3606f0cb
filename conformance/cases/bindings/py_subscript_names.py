return [await tools["echo"](1), "echo" in tools, hasattr(tools, "missing")]
