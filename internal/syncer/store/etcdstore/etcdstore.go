// Package etcdstore is the state store backend kept in an etcd cluster of
// its own (go.etcd.io/etcd/client/v3), for large fleets or to keep
// leafsync's writes off the host's etcd. Records live under
// <prefix>clusters/<record> (a member's head <cluster>, its ledger parts
// <cluster>.ledger-<i>), the writer term under <prefix>term. Writes are
// transactions conditional on the key's mod revision (create revision 0 for
// a new record), so a writer that read an older revision gets a conflict.
package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leafsync/leafsync/internal/syncer/store"
)

// DefaultPrefix is the default key prefix.
const DefaultPrefix = "/leafsync/"

// Options configure the connection to etcd.
type Options struct {
	// Endpoints are client URLs (https://host:2379) or host:port.
	Endpoints []string
	// Prefix of every key (default /leafsync/).
	Prefix string
	// DialTimeout bounds connecting (and authenticating) to etcd.
	DialTimeout time.Duration
	// CAFile verifies etcd's serving certificate; CertFile and KeyFile are
	// the client certificate (mutual TLS). Any of them enables TLS.
	CAFile, CertFile, KeyFile string
	// Username and Password authenticate with etcd's auth (may be empty).
	Username, Password string
	// Logger for the etcd client (silent when nil).
	Logger *zap.Logger
}

// Store keeps records in etcd. It connects lazily and reconnects after a
// failed connect, so that leafsync starts (and decides from memory) while
// etcd is unreachable.
type Store struct {
	opts   Options
	prefix string

	mu  sync.Mutex
	cli *clientv3.Client
}

// New returns a Store; it does not connect yet.
func New(o Options) (*Store, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("etcd store: no endpoints")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("etcd store: certFile and keyFile go together")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &Store{opts: o, prefix: o.Prefix}, nil
}

func (s *Store) client(ctx context.Context) (*clientv3.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cli != nil {
		return s.cli, nil
	}
	o := s.opts
	cfg := clientv3.Config{
		Endpoints:   o.Endpoints,
		DialTimeout: o.DialTimeout,
		Username:    o.Username,
		Password:    o.Password,
		Logger:      o.Logger,
		Context:     context.Background(),
		// Keepalives notice a dead member and move to another one.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		PermitWithoutStream:  true,
	}
	if o.CAFile != "" || o.CertFile != "" {
		tlsCfg, err := (transport.TLSInfo{CertFile: o.CertFile, KeyFile: o.KeyFile, TrustedCAFile: o.CAFile}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd store TLS: %w", err)
		}
		cfg.TLS = tlsCfg
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, wrap(fmt.Errorf("connecting to etcd %s: %w", strings.Join(o.Endpoints, ","), err))
	}
	s.cli = cli
	return cli, nil
}

// Client returns the etcd client, connecting if needed.
func (s *Store) Client(ctx context.Context) (*clientv3.Client, error) { return s.client(ctx) }

// Close closes the client.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cli == nil {
		return nil
	}
	err := s.cli.Close()
	s.cli = nil
	return err
}

// Backend implements store.Store.
func (s *Store) Backend() string { return "etcd" }

// Key is the etcd key of a record (a cluster's head, or a ledger part).
func (s *Store) Key(record string) string { return s.prefix + "clusters/" + record }

// TermKey is the etcd key of the writer term.
func (s *Store) TermKey() string { return s.prefix + "term" }

func version(rev int64) store.Version { return store.Version(strconv.FormatInt(rev, 10)) }

func revision(v store.Version) (int64, error) {
	r, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || r <= 0 {
		return 0, fmt.Errorf("etcd store: bad version %q", v)
	}
	return r, nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, record string) (store.ClusterState, store.Version, error) {
	cli, err := s.client(ctx)
	if err != nil {
		return store.ClusterState{}, "", err
	}
	resp, err := cli.Get(ctx, s.Key(record))
	if err != nil {
		return store.ClusterState{}, "", wrap(err)
	}
	if len(resp.Kvs) == 0 {
		return store.ClusterState{}, "", store.ErrNotFound
	}
	kv := resp.Kvs[0]
	st, err := store.Decode(kv.Value)
	if err != nil {
		err = fmt.Errorf("etcd key %s: %w", kv.Key, err)
	}
	return st, version(kv.ModRevision), err
}

// Put implements store.Store: a transaction conditional on the key's mod
// revision (or on its absence when v is "").
func (s *Store) Put(ctx context.Context, record string, st store.ClusterState, v store.Version) (store.Version, error) {
	data, _, err := store.Encode(st)
	if err != nil {
		return "", err
	}
	key := s.Key(record)
	cmp, err := s.unchanged(key, v)
	if err != nil {
		return "", err
	}
	cli, err := s.client(ctx)
	if err != nil {
		return "", err
	}
	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, string(data))).Commit()
	if err != nil {
		return "", wrap(err)
	}
	if !resp.Succeeded {
		return "", fmt.Errorf("%w (etcd key %s)", store.ErrConflict, key)
	}
	return version(resp.Header.Revision), nil
}

func (s *Store) unchanged(key string, v store.Version) (clientv3.Cmp, error) {
	if v == "" {
		return clientv3.Compare(clientv3.CreateRevision(key), "=", 0), nil
	}
	rev, err := revision(v)
	if err != nil {
		return clientv3.Cmp{}, err
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", rev), nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, record string, v store.Version) error {
	key := s.Key(record)
	cmp, err := s.unchanged(key, v)
	if err != nil {
		return err
	}
	cli, err := s.client(ctx)
	if err != nil {
		return err
	}
	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return wrap(err)
	}
	if resp.Succeeded {
		return nil
	}
	if r := resp.Responses[0].GetResponseRange(); r != nil && r.Count == 0 {
		return nil // already gone
	}
	return fmt.Errorf("%w (etcd key %s)", store.ErrConflict, key)
}

// Scan implements store.Store: a paginated range read at one revision.
func (s *Store) Scan(ctx context.Context) ([]store.Record, error) {
	dir := s.prefix + "clusters/"
	return s.scan(ctx, dir, clientv3.GetPrefixRangeEnd(dir))
}

// List implements store.Store: the head's key and its parts' prefix, read
// in one transaction (one revision).
func (s *Store) List(ctx context.Context, cluster string) ([]store.Record, error) {
	cli, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	head := s.Key(cluster)
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(head), clientv3.OpGet(head+".", clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, wrap(err)
	}
	var out []store.Record
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().GetKvs() {
			record := strings.TrimPrefix(string(kv.Key), s.prefix+"clusters/")
			if !store.RecordOf(record, cluster) {
				continue
			}
			st, err := store.Decode(kv.Value)
			if err != nil {
				err = fmt.Errorf("etcd key %s: %w", kv.Key, err)
			}
			out = append(out, store.Record{Name: record, Cluster: cluster, State: st, Version: version(kv.ModRevision), Err: err})
		}
	}
	return out, nil
}

// scan reads the records in [from, end) at one revision.
func (s *Store) scan(ctx context.Context, from, end string) ([]store.Record, error) {
	cli, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	dir := s.prefix + "clusters/"
	var (
		rev int64
		out []store.Record
	)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(500)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, wrap(err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			record := strings.TrimPrefix(string(kv.Key), dir)
			of := store.ClusterOf(record)
			if !store.RecordOf(record, of) {
				continue
			}
			st, err := store.Decode(kv.Value)
			if err != nil {
				err = fmt.Errorf("etcd key %s: %w", kv.Key, err)
			}
			out = append(out, store.Record{Name: record, Cluster: of, State: st, Version: version(kv.ModRevision), Err: err})
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// NextTerm implements store.Store: the term is the revision of a write to
// the term key, which etcd makes greater than any before.
func (s *Store) NextTerm(ctx context.Context) (uint64, error) {
	cli, err := s.client(ctx)
	if err != nil {
		return 0, err
	}
	resp, err := cli.Put(ctx, s.TermKey(), time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return 0, wrap(err)
	}
	return uint64(resp.Header.Revision), nil
}

// Term implements store.Store: the mod revision of the term key.
func (s *Store) Term(ctx context.Context) (uint64, error) {
	cli, err := s.client(ctx)
	if err != nil {
		return 0, err
	}
	resp, err := cli.Get(ctx, s.TermKey())
	if err != nil {
		return 0, wrap(err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return uint64(resp.Kvs[0].ModRevision), nil
}

// wrap marks errors that mean "not reachable / not now" as
// store.ErrUnavailable.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || clientv3.IsConnCanceled(err) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted, codes.Aborted:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

var _ store.Store = (*Store)(nil)
