package model

import (
	"math"
	"strconv"
)

// MaxAlertAt bounds the thresholds of Config.AlertAt: an alert per
// threshold is a handful, not a gauge.
const MaxAlertAt = 4

// ValidateAlertAt checks a configuration's alert thresholds: at most
// MaxAlertAt, each a fraction of capacity in (0, 1], in ascending order
// and each once. The field named is "alert_at".
func ValidateAlertAt(at []float64) error {
	if len(at) > MaxAlertAt {
		return invalid("alert_at", strconv.Itoa(len(at))+" thresholds", "takes at most "+strconv.Itoa(MaxAlertAt))
	}
	for i, t := range at {
		v := strconv.FormatFloat(t, 'g', -1, 64)
		if math.IsNaN(t) || t <= 0 || t > 1 {
			return invalid("alert_at", v, "must be a fraction of capacity in (0, 1]")
		}
		if i > 0 && t <= at[i-1] {
			return invalid("alert_at", v, "must be above the threshold before it (ascending, each once)")
		}
	}
	return nil
}
