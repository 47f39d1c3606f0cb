# smolagents' style: tools are bare functions called as if synchronous. The call is made, and
# using its result without `await` fails there with a clear error.
results = web_search("rust sandboxing")
for result in results:
    print(result)
