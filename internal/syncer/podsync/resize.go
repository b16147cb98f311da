package podsync

import (
	"context"

	"github.com/leafsync/leafsync/internal/syncer/podsync/decide"
)

func (x *execution) resizeMember(ctx context.Context, a decide.Action) error { return nil }
