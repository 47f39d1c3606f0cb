return "hello"
