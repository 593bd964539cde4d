package broker

import "os/exec"

func execCommand(argv []string) *exec.Cmd { return exec.Command(argv[0], argv[1:]...) }
