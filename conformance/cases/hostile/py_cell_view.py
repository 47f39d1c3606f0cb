import os, socket
return {
    "processes": sorted(p for p in os.listdir("/proc") if p.isdigit()),
    "pid": os.getpid(),
    "uid": os.getuid(),
    "hostname": socket.gethostname(),
    "work_dir": os.getcwd().startswith("/tmp/work-"),
    "work_dir_files": os.listdir("."),
    "host_files": [p for p in ("/etc/passwd", "/etc/shadow", "/sys", "/proc/meminfo") if os.path.exists(p)],
}
