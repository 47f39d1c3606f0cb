throw {}
