package main

import (
	"fmt"
	"os"
	"time"

	"k8s.io/utils/clock"
)

// testClockSkewEnv sets leafsync's clock off the real one by a duration
// ("-60s": a minute behind), for tests of what a clock that disagrees with
// the host's does (test/e2e/clocks_test.go). Test only: it is not a flag or
// a configuration field, the chart never sets it, and leafsync logs a
// warning when it is set.
const testClockSkewEnv = "LEAFSYNC_TEST_CLOCK_SKEW"

// testClock is the clock the controllers get: the real one, or one skewed
// by $LEAFSYNC_TEST_CLOCK_SKEW. skew is 0 when the variable is unset.
func testClock() (c clock.WithTicker, skew time.Duration, err error) {
	v, ok := os.LookupEnv(testClockSkewEnv)
	if !ok || v == "" {
		return clock.RealClock{}, 0, nil
	}
	skew, err = time.ParseDuration(v)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", testClockSkewEnv, err)
	}
	return skewedClock{skew: skew}, skew, nil
}

// skewedClock reads the time skew off the real clock; timers and tickers
// measure durations and are the real clock's.
type skewedClock struct {
	clock.RealClock
	skew time.Duration
}

func (c skewedClock) Now() time.Time                  { return c.RealClock.Now().Add(c.skew) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
