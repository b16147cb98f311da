package enginestate

import (
	"encoding/json"

	"github.com/leafsync/leafsync/internal/syncer/store"
)

// Snapshot is the engine's snapshot of a member in the state store
// (hysteresis.Fleet.SnapshotCluster, versioned JSON): a value section
// ("hysteresis" in the member's head record). On a merge with an older
// writer's record the current leader's snapshot wins, for its engine
// decides and was restored from the store before its first probe; theirs
// is taken only while this leader has none.
var Snapshot = store.NewSection(store.Section[json.RawMessage]{
	Name: "hysteresis",
	Merge: func(_, theirs, mine json.RawMessage) json.RawMessage {
		if len(mine) == 0 {
			return theirs
		}
		return mine
	},
})
