package flows

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as a string: Go's form ("90s", "1h30m")
// or whole days ("7d"), which Go's form lacks and flows need (digest windows up
// to 30 days).
type Duration time.Duration

// D is d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// maxDays bounds "<n>d": far above any flow limit (MaxWindow), far below the
// 106,751 days at which n×24h would overflow a time.Duration.
const maxDays = 3660

// ParseDuration parses Go's duration form or "<n>d" (n a whole number of days,
// at most maxDays).
func ParseDuration(s string) (Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > maxDays {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return Duration(time.Duration(n) * 24 * time.Hour), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return Duration(d), nil
}

// String writes d as Go does, or as whole days.
func (d Duration) String() string {
	if d > 0 && time.Duration(d)%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(time.Duration(d)/(24*time.Hour)), 10) + "d"
	}
	return time.Duration(d).String()
}

// MarshalJSON writes d as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"5s\", \"1h\" or \"7d\"")
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
