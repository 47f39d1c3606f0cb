x = []
x.append(x)
return x
