package cluster

import (
	"net/url"
	"strings"

	"github.com/tmux-amq/tamq/internal/errs"
)

// The key layout under the prefix: a claim per task, and the doctor's probe
// keys (and the tasks' shared checkpoints, checkpoints.go). Nothing else of
// ours lives there.
const (
	tasksDir  = "/tasks/"
	doctorDir = "/doctor/"
)

// maxTaskID bounds a task id: etcd keys may be long, but a task id is a
// name, not a document.
const maxTaskID = 1024

// taskKey is the claim key of taskID. The id is escaped as a path segment
// (url.PathEscape: "/" becomes %2F, "%" %25), so whatever State Hub calls
// a task, its key is one segment under <prefix>/tasks/ and cannot name
// another task's key or a key outside the prefix.
func taskKey(prefix, taskID string) (string, error) {
	if taskID == "" {
		return "", errs.New(errs.BadRequest, "cluster: empty task id")
	}
	if len(taskID) > maxTaskID {
		return "", errs.New(errs.BadRequest, "cluster: task id longer than %d bytes", maxTaskID)
	}
	return prefix + tasksDir + url.PathEscape(taskID), nil
}

// taskOfKey is the task id of a claim key, and false for a key that is not
// one (outside <prefix>/tasks/, more than one segment, or not escaped as
// taskKey escapes).
func taskOfKey(prefix, key string) (string, bool) {
	seg, ok := strings.CutPrefix(key, prefix+tasksDir)
	if !ok || seg == "" || strings.Contains(seg, "/") {
		return "", false
	}
	id, err := url.PathUnescape(seg)
	if err != nil || url.PathEscape(id) != seg {
		return "", false
	}
	return id, true
}

// doctorKey is the doctor's probe key of a host.
func doctorKey(prefix, hostID string) string {
	return prefix + doctorDir + url.PathEscape(hostID)
}
