# A program written as if tools were synchronous (smolagents' style): the call is made, and using
# its result without `await` fails at that use with a clear error instead of printing
# `<_Call object>`.
weather = tools.get_weather({"city": "Lisbon"})
print(weather["celsius"])
