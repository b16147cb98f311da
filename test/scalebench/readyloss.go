package scalebench

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ReadyLoss is a leaf, Ready before, seen with its Ready condition False
// or Unknown: what KCM does to a leaf whose Lease lapsed, before it
// taints it and evicts its pods. leafsync promises it never happens to a
// leaf whose member is healthy, as every member in the bench is.
type ReadyLoss struct {
	Leaf   string    `json:"leaf"`
	At     time.Time `json:"at"`
	Status string    `json:"status"`
	Reason string    `json:"reason,omitempty"`
}

func (l ReadyLoss) String() string {
	s := fmt.Sprintf("%s %s at %s", l.Leaf, l.Status, l.At.UTC().Format("15:04:05.000"))
	if l.Reason != "" {
		s += " (" + l.Reason + ")"
	}
	return s
}

// readyTracker follows the leaves' Ready conditions, one Node version at
// a time: when each leaf was first Ready, and every change away from True
// of a leaf that had been Ready.
type readyTracker struct {
	first  map[string]time.Time
	status map[string]corev1.ConditionStatus
	losses []ReadyLoss
}

func newReadyTracker() readyTracker {
	return readyTracker{first: map[string]time.Time{}, status: map[string]corev1.ConditionStatus{}}
}

// observe takes a version of leaf n, seen at at.
func (r *readyTracker) observe(n *corev1.Node, at time.Time) {
	var cond corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			cond = c
		}
	}
	prev := r.status[n.Name]
	r.status[n.Name] = cond.Status
	if cond.Status == corev1.ConditionTrue {
		if _, seen := r.first[n.Name]; !seen {
			r.first[n.Name] = at
		}
		return
	}
	// A leaf not yet Ready (just registered, no condition yet) has lost
	// nothing.
	if prev == corev1.ConditionTrue {
		r.losses = append(r.losses, ReadyLoss{Leaf: n.Name, At: at, Status: string(cond.Status), Reason: cond.Reason})
	}
}

// keptLosses is how many of a step's Ready losses it keeps by name.
const keptLosses = 10

// recordLosses puts losses (every one of the step's) in s: their number
// and the first keptLosses.
func (s *Step) recordLosses(losses []ReadyLoss) {
	s.ReadyLost = len(losses)
	s.ReadyLosses = append([]ReadyLoss(nil), losses[:min(len(losses), keptLosses)]...)
}

// readyLossText says which leaves of s lost Ready and when; "" if none did.
func (s Step) readyLossText() string {
	if s.ReadyLost == 0 {
		return ""
	}
	var names []string
	for _, l := range s.ReadyLosses {
		names = append(names, l.String())
	}
	text := fmt.Sprintf("%d times a leaf lost Ready: %s", s.ReadyLost, strings.Join(names, ", "))
	if more := s.ReadyLost - len(s.ReadyLosses); more > 0 {
		text += fmt.Sprintf(" and %d more", more)
	}
	return text
}
