package api

// TopDeniedPath is the route of the entities refused most.
const TopDeniedPath = Version + "/metrics/top-denied"

// MaxTopDenied bounds the n of GET /v1/metrics/top-denied (and is its
// default): the server follows no more (tollgate.TopDeniedSize).
const MaxTopDenied = 128

// DeniedEntity is an entity a limit of a resource refused, with how often
// (tollgate.DeniedEntity): count is at most error over the true number.
type DeniedEntity struct {
	Entity   string `json:"entity"`
	Resource string `json:"resource"`
	Limit    string `json:"limit"`
	Count    uint64 `json:"count"`
	Error    uint64 `json:"error"`
}

// TopDeniedResponse answers GET /v1/metrics/top-denied: the entities the
// server refused most in the request's namespace since it started, most
// refused first.
type TopDeniedResponse struct {
	Entities []DeniedEntity `json:"entities"`
}

// Alert is the body of the JSON POST that `tollgate serve --alert-webhook`
// sends when an entity's use of a limit crosses one of its
// configuration's alert_at thresholds upward (tollgate.Alert).
type Alert struct {
	// Key names the crossing's entity, resource, limit and threshold
	// ("namespace/entity/resource/limit@threshold"): several replicas each
	// alert for the crossings they see, and a receiver that wants one
	// alert per crossing drops a key it saw within a short window.
	Key       string  `json:"key"`
	Namespace string  `json:"namespace"`
	Entity    string  `json:"entity"`
	Resource  string  `json:"resource"`
	Limit     string  `json:"limit"`
	Threshold float64 `json:"threshold"`
	// Use is the share of the limit's capacity taken after the decision
	// that crossed (above 1 for a refusal: the amount asked for counts).
	Use float64 `json:"use"`
	// At is the decision's time, RFC 3339 with milliseconds, UTC; AtMS
	// the same in Unix milliseconds.
	At   string `json:"at"`
	AtMS int64  `json:"at_ms"`
}
