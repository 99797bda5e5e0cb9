package rls

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/tollgate-rl/tollgate/model"
)

// hashPrefix marks an entity id made from a hashed descriptor value.
const hashPrefix = "h-"

// hashValue returns "h-" and the first 32 hex digits (128 bits) of the
// SHA-256 of v: the stand-in for a value that would make an invalid id.
func hashValue(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hashPrefix + hex.EncodeToString(sum[:16])
}

// match returns the first rule that matches d and the value of the entry it
// matched, or nil. A nil dr (an unknown domain) matches nothing.
func (dr *domainRules) match(d *ratelimitv3.RateLimitDescriptor) (*rule, string) {
	if dr == nil {
		return nil, ""
	}
	entries := d.GetEntries()
	for i := range dr.rules {
		r := &dr.rules[i]
		for _, e := range entries {
			if r.matches(e) {
				return r, e.GetValue()
			}
		}
	}
	return nil, ""
}

func (r *rule) matches(e *ratelimitv3.RateLimitDescriptor_Entry) bool {
	return e.GetKey() == r.key && (!r.hasValue || e.GetValue() == r.value)
}

// entityID expands the rule's entity template with value. A value that
// would make an invalid id is replaced by its hash (see hashValue), which
// compile has checked always fits the template.
func (r *rule) entityID(value string) string {
	if !r.templated {
		return r.entity
	}
	if len(value) <= model.MaxEntityIDLen {
		id := strings.ReplaceAll(r.entity, ValuePlaceholder, value)
		if model.ValidateEntityID(id) == nil {
			return id
		}
	}
	return strings.ReplaceAll(r.entity, ValuePlaceholder, hashValue(value))
}
