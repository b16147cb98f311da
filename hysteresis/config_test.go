package hysteresis

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	"sigs.k8s.io/yaml"
)

func TestDefaultsValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultFleetConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	d := DefaultConfig()
	if d.ProbeInterval.Duration != 5*time.Second || d.CordonAfter.Duration != 10*time.Second ||
		d.NotReadyAfter.Duration != 90*time.Second || d.ReadyAfter.Duration != 30*time.Second ||
		d.HalfLife.Duration != 10*time.Minute {
		t.Errorf("defaults changed: %+v", d)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Suppress, c.Reuse = 300, 500 }, "hysteresis.reuse (500) must be below hysteresis.suppress (300)"},
		{func(c *Config) { c.Suppress, c.Reuse = 300, 300 }, "hysteresis.reuse (300) must be below hysteresis.suppress (300)"},
		{func(c *Config) { c.NotReadyAfter = D(10 * time.Second) }, "hysteresis.notReadyAfter (10s) must exceed hysteresis.cordonAfter (10s)"},
		{func(c *Config) { c.ProbeInterval = D(0) }, "hysteresis.probeInterval (0s) must be positive"},
		{func(c *Config) { c.CordonAfter = D(-time.Second) }, "hysteresis.cordonAfter (-1s) must not be negative"},
		{func(c *Config) { c.ReadyAfter = D(0) }, "hysteresis.readyAfter (0s) must be positive"},
		{func(c *Config) { c.Window = D(time.Minute) }, "hysteresis.window (1m0s) must be at least hysteresis.notReadyAfter (1m30s)"},
		{func(c *Config) { c.MinAvailability = 1.5 }, "hysteresis.minAvailability (1.5) must be between 0 and 1"},
		{func(c *Config) { c.MinAvailability = math.NaN() }, "hysteresis.minAvailability (NaN) must be a finite number"},
		{func(c *Config) { c.PenaltyPerFlap = -1 }, "hysteresis.penaltyPerFlap (-1) must not be negative"},
		{func(c *Config) { c.HalfLife = D(0) }, "hysteresis.halfLife (0s) must be positive"},
		{func(c *Config) { c.Reuse = 0 }, "hysteresis.reuse (0) must be positive"},
		{func(c *Config) { c.MaxPenalty = 2000 }, "hysteresis.maxPenalty (2000) must exceed hysteresis.suppress (2000)"},
		{func(c *Config) { c.MassFraction = 0 }, "hysteresis.massFraction (0) must be above 0 and at most 1"},
		{func(c *Config) { c.MassFraction = 1.1 }, "hysteresis.massFraction (1.1) must be above 0 and at most 1"},
		{func(c *Config) { c.MassMin = 1 }, "hysteresis.massMin (1) must be at least 2"},
	}
	for _, tc := range cases {
		c := DefaultConfig()
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	// Edges that are valid.
	c := DefaultConfig()
	c.CordonAfter, c.MinAvailability, c.PenaltyPerFlap, c.MassFraction, c.MassMin = D(0), 0, 0, 1, 2
	c.Window = c.NotReadyAfter
	if err := c.Validate(); err != nil {
		t.Errorf("valid edges rejected: %v", err)
	}
	// Several errors are all reported.
	c = Config{}
	err := c.Validate()
	if err == nil || strings.Count(err.Error(), "\n") < 5 {
		t.Errorf("zero config: %v", err)
	}
}

func TestConfigJSON(t *testing.T) {
	b, err := json.Marshal(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"probeInterval":"5s","cordonAfter":"10s","notReadyAfter":"1m30s","readyAfter":"30s","window":"10m0s","minAvailability":0.5,"penaltyPerFlap":1000,"halfLife":"10m0s","suppress":2000,"reuse":750,"maxPenalty":6000,"massFraction":0.55,"massMin":3,"massHoldMax":"5m0s","massReleaseInterval":"10s"}`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
	var c Config
	if err := json.Unmarshal([]byte(`{"notReadyAfter":"2m"}`), &c); err != nil {
		t.Fatal(err)
	}
	d := DefaultConfig()
	d.NotReadyAfter = D(2 * time.Minute)
	if c != d {
		t.Errorf("absent fields should keep defaults: %+v", c)
	}
	if err := json.Unmarshal([]byte(`{"notReadyAfter":90}`), &c); err == nil || !strings.Contains(err.Error(), `like "90s"`) {
		t.Errorf("bare number: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"notReadyAfter":"90 s"}`), &c); err == nil {
		t.Error("bad duration accepted")
	}
}

func TestFleetConfigYAML(t *testing.T) {
	file := `
logLevel: debug
hysteresis:
  notReadyAfter: 2m
  minAvailability: 0.4
  clusters:
    eu-1:
      notReadyAfter: 5m
      massMin: 4
    us-2: {}
other:
  x: 1
`
	var v struct {
		Hysteresis FleetConfig `json:"hysteresis"`
	}
	v.Hysteresis = DefaultFleetConfig()
	if err := yaml.Unmarshal([]byte(file), &v); err != nil {
		t.Fatal(err)
	}
	fc := v.Hysteresis
	if err := fc.Validate(); err != nil {
		t.Fatal(err)
	}
	if fc.NotReadyAfter.Duration != 2*time.Minute || fc.MinAvailability != 0.4 || fc.ReadyAfter.Duration != 30*time.Second {
		t.Errorf("defaults: %+v", fc.Config)
	}
	eu := fc.For("eu-1")
	if eu.NotReadyAfter.Duration != 5*time.Minute || eu.MassMin != 4 || eu.MinAvailability != 0.4 {
		t.Errorf("eu-1: %+v", eu)
	}
	if fc.For("nope") != fc.Config || fc.For("us-2") != fc.Config {
		t.Error("clusters without overrides should get the defaults")
	}
	// Round trip.
	b, err := yaml.Marshal(fc)
	if err != nil {
		t.Fatal(err)
	}
	var back FleetConfig
	if err := yaml.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, fc) {
		t.Errorf("round trip:\n%s\n%+v\n%+v", b, back, fc)
	}
	// A cluster's effective config is validated, naming the cluster.
	bad := `{"clusters":{"eu-1":{"notReadyAfter":"5s"}}}`
	var f2 FleetConfig
	if err := json.Unmarshal([]byte(bad), &f2); err != nil {
		t.Fatal(err)
	}
	if err := f2.Validate(); err == nil || !strings.Contains(err.Error(), "hysteresis.clusters.eu-1.notReadyAfter (5s) must exceed hysteresis.clusters.eu-1.cordonAfter (10s)") {
		t.Errorf("cluster validation: %v", err)
	}
}

func TestParseOverrides(t *testing.T) {
	o, err := ParseOverrides(map[string]string{
		"probeInterval": "2s", "cordonAfter": "0s", "notReadyAfter": "120s", "readyAfter": "1m",
		"window": "20m", "minAvailability": "0.5", "penaltyPerFlap": "500", "halfLife": "5m",
		"suppress": "3000", "reuse": "1000", "maxPenalty": "9000", "massFraction": "0.7", "massMin": "5",
		"massHoldMax": "15m", "massReleaseInterval": "0s",
	})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Apply(DefaultConfig())
	want := Config{
		ProbeInterval: D(2 * time.Second), CordonAfter: D(0), NotReadyAfter: D(120 * time.Second),
		ReadyAfter: D(time.Minute), Window: D(20 * time.Minute), MinAvailability: 0.5, PenaltyPerFlap: 500,
		HalfLife: D(5 * time.Minute), Suppress: 3000, Reuse: 1000, MaxPenalty: 9000, MassFraction: 0.7, MassMin: 5,
		MassHoldMax: D(15 * time.Minute), MassReleaseInterval: D(0),
	}
	if c != want {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
	for _, tc := range []struct {
		kv   map[string]string
		want string
	}{
		{map[string]string{"notReadyAfer": "1m"}, `unknown hysteresis override key "notReadyAfer"`},
		{map[string]string{"notReadyAfter": "90"}, `hysteresis override notReadyAfter: invalid duration "90"`},
		{map[string]string{"readyAfter": "-1s"}, `hysteresis override readyAfter: duration "-1s" must not be negative`},
		{map[string]string{"minAvailability": "half"}, `hysteresis override minAvailability: invalid number "half"`},
		{map[string]string{"suppress": "NaN"}, `hysteresis override suppress: invalid number "NaN"`},
		{map[string]string{"reuse": "-3"}, `hysteresis override reuse: "-3" must not be negative`},
		{map[string]string{"massMin": "2.5"}, `hysteresis override massMin: invalid integer "2.5"`},
	} {
		_, err := ParseOverrides(tc.kv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.kv, err, tc.want)
		}
	}
	// Empty input is no overrides.
	if o, err := ParseOverrides(nil); err != nil || o != (Overrides{}) {
		t.Errorf("nil: %v %v", o, err)
	}
}

func TestOverridesMerge(t *testing.T) {
	a, _ := ParseOverrides(map[string]string{"notReadyAfter": "2m", "reuse": "500"})
	b, _ := ParseOverrides(map[string]string{"notReadyAfter": "3m", "massMin": "4"})
	c := a.Merge(b).Apply(DefaultConfig())
	if c.NotReadyAfter.Duration != 3*time.Minute || c.Reuse != 500 || c.MassMin != 4 || c.ReadyAfter.Duration != 30*time.Second {
		t.Errorf("merge: %+v", c)
	}
	all, _ := ParseOverrides(map[string]string{
		"probeInterval": "2s", "cordonAfter": "0s", "notReadyAfter": "120s", "readyAfter": "1m",
		"window": "20m", "minAvailability": "0.5", "penaltyPerFlap": "500", "halfLife": "5m",
		"suppress": "3000", "reuse": "1000", "maxPenalty": "9000", "massFraction": "0.7", "massMin": "5",
		"massHoldMax": "15m", "massReleaseInterval": "0s",
	})
	if (Overrides{}).Merge(all).Apply(DefaultConfig()) != all.Apply(DefaultConfig()) {
		t.Error("Merge misses a field")
	}
	if all.Merge(Overrides{}) != all {
		t.Error("Merge with nothing changed something")
	}
}

// Thresholds names every field of Config and of Overrides, in order, by
// JSON name, and reaches that field; Flag is the kebab case of Name.
func TestThresholdsCoverConfig(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeOf(Config{}), reflect.TypeOf(Overrides{})} {
		if typ.NumField() != len(Thresholds) {
			t.Fatalf("%s has %d fields, Thresholds %d", typ, typ.NumField(), len(Thresholds))
		}
		for i, th := range Thresholds {
			if name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); name != th.Name {
				t.Errorf("%s field %d is %q, Thresholds has %q", typ, i, name, th.Name)
			}
		}
	}
	// Every field distinct, so a threshold reaching the wrong field shows.
	var cfg Config
	c := reflect.ValueOf(&cfg).Elem()
	for i := range c.NumField() {
		switch f := c.Field(i).Addr().Interface().(type) {
		case *Duration:
			*f = D(time.Duration(i+1) * time.Second)
		case *float64:
			*f = float64(i + 1)
		case *int:
			*f = i + 1
		}
	}
	for i, th := range Thresholds {
		if got := th.Get(cfg); got != c.Field(i).Interface() {
			t.Errorf("%s: Get = %v, field holds %v", th.Name, got, c.Field(i).Interface())
		}
		o, err := ParseOverrides(map[string]string{th.Name: "1"})
		if err != nil {
			o, err = ParseOverrides(map[string]string{th.Name: "1s"})
		}
		if err != nil {
			t.Fatal(err)
		}
		for j := range reflect.TypeOf(o).NumField() {
			if set := !reflect.ValueOf(o).Field(j).IsNil(); set != (i == j) {
				t.Errorf("%s: override field %d set = %v", th.Name, j, set)
			}
		}
		var kebab strings.Builder
		for _, r := range th.Name {
			if unicode.IsUpper(r) {
				kebab.WriteByte('-')
				r = unicode.ToLower(r)
			}
			kebab.WriteRune(r)
		}
		if th.Flag != kebab.String() {
			t.Errorf("%s: Flag %q, want %q", th.Name, th.Flag, kebab.String())
		}
	}
}
