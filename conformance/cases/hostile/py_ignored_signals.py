import signal
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGXCPU, signal.SIG_IGN)
while True:
    pass
