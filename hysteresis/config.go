package hysteresis

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"
)

// Duration is a time.Duration that marshals to and from JSON (and so YAML
// through sigs.k8s.io/yaml) as a Go duration string such as "90s" or "1m30s".
type Duration struct{ time.Duration }

// D is shorthand for Duration{d}.
func D(d time.Duration) Duration { return Duration{d} }

// MarshalJSON encodes d as a duration string, e.g. "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.Duration.String())
}

// UnmarshalJSON accepts a duration string such as "90s" or "1m30s".
// Bare numbers are refused: their unit would be a guess.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"90s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a Go duration like \"90s\" or \"1m30s\"", s)
	}
	d.Duration = v
	return nil
}

// Config holds every threshold of the engine for one cluster; Thresholds
// lists them. The JSON field names are the names used everywhere (config
// file, Secret annotations mapped by registration, snapshot, docs). See the
// package documentation for what each threshold means and why the defaults
// are what they are.
type Config struct {
	// ProbeInterval is how often the member is probed. Each observation adds
	// at most 1.5×ProbeInterval of evidence, so a pause of leafsync is not
	// counted as failure (or success).
	ProbeInterval Duration `json:"probeInterval"`
	// CordonAfter: failures continuous for this long cordon the leaf.
	// Zero cordons on the first failure.
	CordonAfter Duration `json:"cordonAfter"`
	// NotReadyAfter: network/server failures continuous for this long make
	// the leaf NotReady. Must exceed CordonAfter.
	NotReadyAfter Duration `json:"notReadyAfter"`
	// ReadyAfter: a Recovering cluster becomes Ready after successes
	// continuous for this long.
	ReadyAfter Duration `json:"readyAfter"`
	// Window is the span over which availability is measured. At least
	// NotReadyAfter.
	Window Duration `json:"window"`
	// MinAvailability in [0,1]: a Suspect cluster whose availability over
	// Window is below it, with at least NotReadyAfter of failure in Window,
	// becomes NotReady. 0 disables the rule.
	MinAvailability float64 `json:"minAvailability"`
	// PenaltyPerFlap is added to the damping penalty per suppressed flap
	// (Suspect → Ready). 0 disables damping.
	PenaltyPerFlap float64 `json:"penaltyPerFlap"`
	// HalfLife of the exponential decay of the penalty.
	HalfLife Duration `json:"halfLife"`
	// Suppress: when the penalty rises above it, the leaf is cordoned...
	Suppress float64 `json:"suppress"`
	// Reuse: ...until the penalty decays below it. Must be below Suppress.
	Reuse float64 `json:"reuse"`
	// MaxPenalty caps the penalty, bounding how long damping can cordon.
	// Must exceed Suppress.
	MaxPenalty float64 `json:"maxPenalty"`
	// MassFraction in (0,1] and MassMin ≥ 2: while at least MassFraction of
	// the fleet's clusters and at least MassMin clusters are failing, this
	// cluster does not move to NotReady...
	MassFraction float64 `json:"massFraction"`
	MassMin      int     `json:"massMin"`
	// MassHoldMax: ...for at most this long (failure evidence while held);
	// then it goes NotReady, at most one cluster of the fleet per
	// MassReleaseInterval (0: no rate limit).
	MassHoldMax         Duration `json:"massHoldMax"`
	MassReleaseInterval Duration `json:"massReleaseInterval"`
}

// DefaultConfig returns the fleet defaults (rationale in the package doc).
func DefaultConfig() Config {
	return Config{
		ProbeInterval:       D(5 * time.Second),
		CordonAfter:         D(10 * time.Second),
		NotReadyAfter:       D(90 * time.Second),
		ReadyAfter:          D(30 * time.Second),
		Window:              D(10 * time.Minute),
		MinAvailability:     0.5,
		PenaltyPerFlap:      1000,
		HalfLife:            D(10 * time.Minute),
		Suppress:            2000,
		Reuse:               750,
		MaxPenalty:          6000,
		MassFraction:        0.55,
		MassMin:             3,
		MassHoldMax:         D(5 * time.Minute),
		MassReleaseInterval: D(10 * time.Second),
	}
}

// UnmarshalJSON decodes c starting from DefaultConfig, so fields absent from
// the input keep their default.
func (c *Config) UnmarshalJSON(b []byte) error {
	type plain Config
	p := plain(DefaultConfig())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*c = Config(p)
	return nil
}

// Validate checks every value and returns an error naming each bad field,
// e.g. `hysteresis.reuse (500) must be below hysteresis.suppress (300)`.
func (c Config) Validate() error { return c.validate("hysteresis.") }

func (c Config) validate(p string) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	positive := func(name string, d Duration) {
		if d.Duration <= 0 {
			bad("%s%s (%s) must be positive", p, name, d)
		}
	}
	finite := func(name string, v float64) bool {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			bad("%s%s (%g) must be a finite number", p, name, v)
			return false
		}
		return true
	}
	positive("probeInterval", c.ProbeInterval)
	if c.CordonAfter.Duration < 0 {
		bad("%scordonAfter (%s) must not be negative", p, c.CordonAfter)
	}
	if c.NotReadyAfter.Duration <= c.CordonAfter.Duration {
		bad("%snotReadyAfter (%s) must exceed %scordonAfter (%s)", p, c.NotReadyAfter, p, c.CordonAfter)
	}
	positive("readyAfter", c.ReadyAfter)
	if c.Window.Duration < c.NotReadyAfter.Duration {
		bad("%swindow (%s) must be at least %snotReadyAfter (%s)", p, c.Window, p, c.NotReadyAfter)
	}
	if finite("minAvailability", c.MinAvailability) && (c.MinAvailability < 0 || c.MinAvailability > 1) {
		bad("%sminAvailability (%g) must be between 0 and 1", p, c.MinAvailability)
	}
	if finite("penaltyPerFlap", c.PenaltyPerFlap) && c.PenaltyPerFlap < 0 {
		bad("%spenaltyPerFlap (%g) must not be negative", p, c.PenaltyPerFlap)
	}
	positive("halfLife", c.HalfLife)
	okS, okR, okM := finite("suppress", c.Suppress), finite("reuse", c.Reuse), finite("maxPenalty", c.MaxPenalty)
	if okR && c.Reuse <= 0 {
		bad("%sreuse (%g) must be positive", p, c.Reuse)
	}
	if okS && okR && c.Reuse >= c.Suppress {
		bad("%sreuse (%g) must be below %ssuppress (%g)", p, c.Reuse, p, c.Suppress)
	}
	if okS && okM && c.MaxPenalty <= c.Suppress {
		bad("%smaxPenalty (%g) must exceed %ssuppress (%g)", p, c.MaxPenalty, p, c.Suppress)
	}
	if finite("massFraction", c.MassFraction) && (c.MassFraction <= 0 || c.MassFraction > 1) {
		bad("%smassFraction (%g) must be above 0 and at most 1", p, c.MassFraction)
	}
	if c.MassMin < 2 {
		bad("%smassMin (%d) must be at least 2 (one failing cluster is never a mass disconnect)", p, c.MassMin)
	}
	positive("massHoldMax", c.MassHoldMax)
	if c.MassReleaseInterval.Duration < 0 {
		bad("%smassReleaseInterval (%s) must not be negative", p, c.MassReleaseInterval)
	}
	return errors.Join(errs...)
}

// Overrides holds per-cluster overrides of Config: nil fields use the fleet
// default. JSON names are those of Config.
type Overrides struct {
	ProbeInterval   *Duration `json:"probeInterval,omitempty"`
	CordonAfter     *Duration `json:"cordonAfter,omitempty"`
	NotReadyAfter   *Duration `json:"notReadyAfter,omitempty"`
	ReadyAfter      *Duration `json:"readyAfter,omitempty"`
	Window          *Duration `json:"window,omitempty"`
	MinAvailability *float64  `json:"minAvailability,omitempty"`
	PenaltyPerFlap  *float64  `json:"penaltyPerFlap,omitempty"`
	HalfLife        *Duration `json:"halfLife,omitempty"`
	Suppress        *float64  `json:"suppress,omitempty"`
	Reuse           *float64  `json:"reuse,omitempty"`
	MaxPenalty      *float64  `json:"maxPenalty,omitempty"`
	MassFraction    *float64  `json:"massFraction,omitempty"`
	MassMin         *int      `json:"massMin,omitempty"`
	// MassHoldMax and MassReleaseInterval override the mass guard's bound.
	MassHoldMax         *Duration `json:"massHoldMax,omitempty"`
	MassReleaseInterval *Duration `json:"massReleaseInterval,omitempty"`
}

// Apply returns c with every non-nil field of o replacing c's value.
func (o Overrides) Apply(c Config) Config {
	for _, t := range Thresholds {
		t.field.apply(&c, o)
	}
	return c
}

// Merge returns o with every non-nil field of over replacing o's value
// (over wins), e.g. Secret annotations over the config file's cluster entry.
func (o Overrides) Merge(over Overrides) Overrides {
	for _, t := range Thresholds {
		t.field.merge(&o, over)
	}
	return o
}

// Threshold is one threshold of Config. Thresholds is the one list of
// them: overrides, the registration Secret annotations and the `leafsync
// simulate` flags derive from it.
type Threshold struct {
	// Name is the JSON name: the key in the config file, in overrides and
	// in snapshots.
	Name string
	// Flag is Name in kebab case: the `leafsync simulate` flag, and after
	// leafsync.io/ the registration Secret annotation.
	Flag string
	// Doc says in one line what it does.
	Doc   string
	field thresholdField
}

// Get returns the threshold's value in c: a Duration, float64 or int.
func (t Threshold) Get(c Config) any { return t.field.get(c) }

// Thresholds lists every threshold, in the order of Config.
var Thresholds = []Threshold{
	{Name: "probeInterval", Flag: "probe-interval", Doc: "how often members are probed",
		field: fieldOf(func(c *Config) *Duration { return &c.ProbeInterval }, func(o *Overrides) **Duration { return &o.ProbeInterval })},
	{Name: "cordonAfter", Flag: "cordon-after", Doc: "cordon after failures continuous for this long",
		field: fieldOf(func(c *Config) *Duration { return &c.CordonAfter }, func(o *Overrides) **Duration { return &o.CordonAfter })},
	{Name: "notReadyAfter", Flag: "not-ready-after", Doc: "NotReady after network/server failures continuous for this long",
		field: fieldOf(func(c *Config) *Duration { return &c.NotReadyAfter }, func(o *Overrides) **Duration { return &o.NotReadyAfter })},
	{Name: "readyAfter", Flag: "ready-after", Doc: "Ready again after successes continuous for this long",
		field: fieldOf(func(c *Config) *Duration { return &c.ReadyAfter }, func(o *Overrides) **Duration { return &o.ReadyAfter })},
	{Name: "window", Flag: "window", Doc: "span over which availability is measured",
		field: fieldOf(func(c *Config) *Duration { return &c.Window }, func(o *Overrides) **Duration { return &o.Window })},
	{Name: "minAvailability", Flag: "min-availability", Doc: "NotReady when availability over the window is below this (0 disables)",
		field: fieldOf(func(c *Config) *float64 { return &c.MinAvailability }, func(o *Overrides) **float64 { return &o.MinAvailability })},
	{Name: "penaltyPerFlap", Flag: "penalty-per-flap", Doc: "flap-damping penalty added per suppressed flap (0 disables damping)",
		field: fieldOf(func(c *Config) *float64 { return &c.PenaltyPerFlap }, func(o *Overrides) **float64 { return &o.PenaltyPerFlap })},
	{Name: "halfLife", Flag: "half-life", Doc: "half-life of the flap-damping penalty",
		field: fieldOf(func(c *Config) *Duration { return &c.HalfLife }, func(o *Overrides) **Duration { return &o.HalfLife })},
	{Name: "suppress", Flag: "suppress", Doc: "cordon while the penalty is above this...",
		field: fieldOf(func(c *Config) *float64 { return &c.Suppress }, func(o *Overrides) **float64 { return &o.Suppress })},
	{Name: "reuse", Flag: "reuse", Doc: "...until it decays below this",
		field: fieldOf(func(c *Config) *float64 { return &c.Reuse }, func(o *Overrides) **float64 { return &o.Reuse })},
	{Name: "maxPenalty", Flag: "max-penalty", Doc: "cap on the flap-damping penalty",
		field: fieldOf(func(c *Config) *float64 { return &c.MaxPenalty }, func(o *Overrides) **float64 { return &o.MaxPenalty })},
	{Name: "massFraction", Flag: "mass-fraction", Doc: "mass-disconnect guard: fraction of clusters failing at once",
		field: fieldOf(func(c *Config) *float64 { return &c.MassFraction }, func(o *Overrides) **float64 { return &o.MassFraction })},
	{Name: "massMin", Flag: "mass-min", Doc: "mass-disconnect guard: minimum number of clusters failing at once",
		field: fieldOf(func(c *Config) *int { return &c.MassMin }, func(o *Overrides) **int { return &o.MassMin })},
	{Name: "massHoldMax", Flag: "mass-hold-max", Doc: "mass-disconnect guard: hold a failing cluster out of NotReady for at most this long",
		field: fieldOf(func(c *Config) *Duration { return &c.MassHoldMax }, func(o *Overrides) **Duration { return &o.MassHoldMax })},
	{Name: "massReleaseInterval", Flag: "mass-release-interval", Doc: "mass-disconnect guard: after the hold, at most one cluster goes NotReady per interval",
		field: fieldOf(func(c *Config) *Duration { return &c.MassReleaseInterval }, func(o *Overrides) **Duration { return &o.MassReleaseInterval })},
}

// thresholdField reaches one threshold in Config and in Overrides.
type thresholdField interface {
	get(c Config) any
	apply(c *Config, o Overrides)
	merge(o *Overrides, over Overrides)
	parse(o *Overrides, v string) error
}

type field[T Duration | float64 | int] struct {
	cfg func(*Config) *T
	ov  func(*Overrides) **T
}

func fieldOf[T Duration | float64 | int](cfg func(*Config) *T, ov func(*Overrides) **T) thresholdField {
	return field[T]{cfg, ov}
}

func (f field[T]) get(c Config) any { return *f.cfg(&c) }

func (f field[T]) apply(c *Config, o Overrides) {
	if v := *f.ov(&o); v != nil {
		*f.cfg(c) = *v
	}
}

func (f field[T]) merge(o *Overrides, over Overrides) {
	if v := *f.ov(&over); v != nil {
		*f.ov(o) = v
	}
}

// parse sets the override from a string; negative values are refused.
func (f field[T]) parse(o *Overrides, s string) error {
	var v T
	switch p := any(&v).(type) {
	case *Duration:
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return fmt.Errorf("invalid duration %q (want e.g. \"90s\")", s)
		case d < 0:
			return fmt.Errorf("duration %q must not be negative", s)
		}
		p.Duration = d
	case *float64:
		x, err := strconv.ParseFloat(s, 64)
		switch {
		case err != nil || math.IsNaN(x) || math.IsInf(x, 0):
			return fmt.Errorf("invalid number %q", s)
		case x < 0:
			return fmt.Errorf("%q must not be negative", s)
		}
		*p = x
	case *int:
		n, err := strconv.Atoi(s)
		switch {
		case err != nil:
			return fmt.Errorf("invalid integer %q", s)
		case n < 0:
			return fmt.Errorf("%q must not be negative", s)
		}
		*p = n
	}
	*f.ov(o) = &v
	return nil
}

// ParseOverrides builds Overrides from string key/values whose keys are
// Threshold names, e.g. {"notReadyAfter": "120s", "minAvailability": "0.5"}.
// Durations use Go syntax ("90s", "2m"). An unknown key, or a value that does
// not parse or is negative, gives an error naming the key. Cross-field rules
// (e.g. reuse below suppress) are checked by Validate on the effective Config.
func ParseOverrides(kv map[string]string) (Overrides, error) {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var o Overrides
	var errs []error
	for _, k := range keys {
		i := slices.IndexFunc(Thresholds, func(t Threshold) bool { return t.Name == k })
		if i < 0 {
			names := make([]string, len(Thresholds))
			for j, t := range Thresholds {
				names[j] = t.Name
			}
			errs = append(errs, fmt.Errorf("unknown hysteresis override key %q (known: %v)", k, names))
			continue
		}
		if err := Thresholds[i].field.parse(&o, kv[k]); err != nil {
			errs = append(errs, fmt.Errorf("hysteresis override %s: %w", k, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Overrides{}, err
	}
	return o, nil
}

// FleetConfig is the `hysteresis:` section of the config file: the fleet
// defaults (inlined, so they sit directly under `hysteresis:`) plus
// per-cluster overrides:
//
//	hysteresis:
//	  notReadyAfter: 90s
//	  readyAfter: 30s
//	  clusters:
//	    eu-1:
//	      notReadyAfter: 120s
//
// Decoding starts from DefaultFleetConfig, so absent fields keep their
// defaults. If the whole section may be absent, initialise the destination
// with DefaultFleetConfig() before decoding.
type FleetConfig struct {
	Config
	Clusters map[string]Overrides `json:"clusters,omitempty"`
}

// DefaultFleetConfig returns DefaultConfig with no per-cluster overrides.
func DefaultFleetConfig() FleetConfig { return FleetConfig{Config: DefaultConfig()} }

// UnmarshalJSON decodes f starting from DefaultFleetConfig. (Needed because
// the embedded Config's UnmarshalJSON would otherwise swallow the clusters.)
func (f *FleetConfig) UnmarshalJSON(b []byte) error {
	type plainConfig Config
	var v struct {
		plainConfig
		Clusters map[string]Overrides `json:"clusters,omitempty"`
	}
	v.plainConfig = plainConfig(DefaultConfig())
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = FleetConfig{Config: Config(v.plainConfig), Clusters: v.Clusters}
	return nil
}

// Validate validates the defaults and every cluster's effective config.
func (f FleetConfig) Validate() error {
	errs := []error{f.Config.validate("hysteresis.")}
	names := make([]string, 0, len(f.Clusters))
	for n := range f.Clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if n == "" {
			errs = append(errs, errors.New("hysteresis.clusters: empty cluster name"))
			continue
		}
		errs = append(errs, f.For(n).validate("hysteresis.clusters."+n+"."))
	}
	return errors.Join(errs...)
}

// For returns the effective config of a cluster: the defaults with the
// cluster's overrides (if any) applied.
func (f FleetConfig) For(cluster string) Config {
	return f.Clusters[cluster].Apply(f.Config)
}
