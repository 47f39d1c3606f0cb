# More arguments than a binding takes is a TypeError at the call, never a silent drop.
try:
    await tools.echo(1, 2, 3)
    return "called"
except TypeError as error:
    return [True, str(error)]
