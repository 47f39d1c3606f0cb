import sys
print("out")
sys.stderr.write("err\n")
sys.stdout.write("partial")
return 1
