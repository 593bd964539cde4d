package cluster

import (
	"net/url"
	"strings"

	"github.com/tmux-amq/tamq/internal/errs"
)

// The key layout under the prefix:
//
//	<prefix>/tasks/<task>                    the claim of each task (shared: any host may take it)
//	<prefix>/last/<task>                     the record of the last claim of the task that shared a checkpoint
//	<prefix>/hosts/<host>/checkpoints/<task> that claim's checkpoint, under the sub-prefix of the host that made it
//	<prefix>/hosts/<host>/doctor             the doctor's probe key of a host
//
// A host writes under its own sub-prefix only, so that etcd's RBAC can let
// each host's user write there alone (docs/scale.md): a checkpoint read
// from under a host's sub-prefix was then written by that host. Nothing
// else of ours lives under the prefix; <prefix>/checkpoints/ and
// <prefix>/doctor/ are an older engine's, never read.
const (
	tasksDir  = "/tasks/"
	lastDir   = "/last/"
	hostsDir  = "/hosts/"
	cpSubdir  = "/checkpoints/"
	doctorSub = "/doctor"
	// The older layout's, which the doctor names for deletion.
	oldCheckpointsDir = "/checkpoints/"
	oldDoctorDir      = "/doctor/"
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

// lastKey is the key of the record of taskID's last claim that shared a
// checkpoint.
func lastKey(prefix, taskID string) (string, error) {
	if _, err := taskKey(prefix, taskID); err != nil {
		return "", err
	}
	return prefix + lastDir + url.PathEscape(taskID), nil
}

// hostDir is the sub-prefix of a host: what it alone writes, under etcd's
// RBAC as docs/scale.md sets it up.
func hostDir(prefix, hostID string) string {
	return prefix + hostsDir + url.PathEscape(hostID)
}

// checkpointKey is where hostID shares its checkpoint of taskID.
func checkpointKey(prefix, hostID, taskID string) (string, error) {
	if _, err := taskKey(prefix, taskID); err != nil {
		return "", err
	}
	if hostID == "" {
		return "", errs.New(errs.BadRequest, "cluster: a checkpoint key without a host")
	}
	return hostDir(prefix, hostID) + cpSubdir + url.PathEscape(taskID), nil
}

// checkpointOfKey is the host and task of a checkpoint key, and false for a
// key that is not one.
func checkpointOfKey(prefix, key string) (hostID, taskID string, ok bool) {
	rest, ok := strings.CutPrefix(key, prefix+hostsDir)
	if !ok {
		return "", "", false
	}
	h, t, ok := strings.Cut(rest, cpSubdir)
	if !ok || h == "" || t == "" || strings.Contains(h, "/") || strings.Contains(t, "/") {
		return "", "", false
	}
	hostID, err1 := url.PathUnescape(h)
	taskID, err2 := url.PathUnescape(t)
	if err1 != nil || err2 != nil || url.PathEscape(hostID) != h || url.PathEscape(taskID) != t {
		return "", "", false
	}
	return hostID, taskID, true
}

// doctorKey is the doctor's probe key of a host, under its sub-prefix.
func doctorKey(prefix, hostID string) string {
	return hostDir(prefix, hostID) + doctorSub
}
