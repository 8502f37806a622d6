package sshexec_test

import "syscall"

func killProcess(pid int) { syscall.Kill(pid, syscall.SIGKILL) }
