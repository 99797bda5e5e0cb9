package api

import (
	"strconv"
	"strings"

	"github.com/tollgate-rl/tollgate/model"
)

// Optimistic locking of entities and stored limits: a GET answers the
// record's version in its body ("version") and as its ETag; a PATCH, PUT
// or DELETE with If-Match of that tag changes the record only if it is
// still at that version, else it answers 412 precondition_failed and
// changes nothing. If-Match: * and no If-Match change it whatever its
// version; If-None-Match: * changes it only if there is none (a PUT of
// limits that must create).

// CodePreconditionFailed is the error code of a 412: the record is no
// longer at the version If-Match named (or exists, for If-None-Match: *).
// It matches model.ErrPreconditionFailed.
const CodePreconditionFailed = "precondition_failed"

// Header names of optimistic locking.
const (
	ETagHeader        = "ETag"
	IfMatchHeader     = "If-Match"
	IfNoneMatchHeader = "If-None-Match"
)

// ETag is the entity tag of version v: the version in double quotes.
func ETag(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` }

// maxETagLen bounds an If-Match value read: a quoted int64 is at most 21
// bytes.
const maxETagLen = 32

// Precondition reads a request's If-Match and If-None-Match: the write
// options they make (model.IfVersion, model.IfAbsent; none for If-Match:
// * or no header). One version in double quotes is the only tag these
// routes answer; anything else is a *model.ValidationError naming the
// header, as is If-None-Match other than *, or both headers at once.
func Precondition(ifMatch, ifNoneMatch string) ([]model.WriteOption, error) {
	ifMatch, ifNoneMatch = strings.TrimSpace(ifMatch), strings.TrimSpace(ifNoneMatch)
	switch {
	case ifMatch != "" && ifNoneMatch != "":
		return nil, model.Invalid(IfNoneMatchHeader, ifNoneMatch, "cannot be sent with If-Match")
	case ifNoneMatch == "*":
		return []model.WriteOption{model.IfAbsent()}, nil
	case ifNoneMatch != "":
		return nil, model.Invalid(IfNoneMatchHeader, ifNoneMatch, `must be * (the record must not exist)`)
	case ifMatch == "" || ifMatch == "*":
		return nil, nil
	}
	v, ok := parseETag(ifMatch)
	if !ok {
		return nil, model.Invalid(IfMatchHeader, ifMatch, `must be * or one version in double quotes, as the ETag of a GET, e.g. "3"`)
	}
	return []model.WriteOption{model.IfVersion(v)}, nil
}

// parseETag reads a tag ETag made.
func parseETag(s string) (int64, bool) {
	if len(s) < 3 || len(s) > maxETagLen || s[0] != '"' || s[len(s)-1] != '"' {
		return 0, false
	}
	digits := s[1 : len(s)-1]
	if digits[0] < '1' || digits[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	return v, err == nil
}

// PreconditionHeaders returns the If-Match or If-None-Match header (name
// and value) that says what opts say of a change's version (model.IfVersion,
// model.IfAbsent), or empty strings when they say nothing.
func PreconditionHeaders(opts ...model.WriteOption) (name, value string) {
	o := model.WriteSettingsOf(opts...)
	switch {
	case o.Expect == nil:
		return "", ""
	case *o.Expect == 0:
		return IfNoneMatchHeader, "*"
	}
	return IfMatchHeader, ETag(*o.Expect)
}
