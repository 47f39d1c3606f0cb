return "\ud800"
