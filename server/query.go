package server

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/tollgate-rl/tollgate/model"
)

// A route's query is as strict as its body: it may hold only the
// parameters the route reads (net/url would drop a malformed pair, and a
// handler read the first of repeated values, silently), each once unless
// the route takes a list. An unknown or repeated parameter is a 400 that
// names it, before the handler runs.

// param is a query parameter a route reads.
type param struct {
	name string
	list bool // given once per value (limits=a&limits=b)
}

// one is a parameter given at most once.
func one(name string) param { return param{name: name} }

// list is a parameter given once per value.
func list(name string) param { return param{name: name, list: true} }

// params are parameters given at most once each.
func params(names ...string) []param {
	out := make([]param, len(names))
	for i, n := range names {
		out[i] = one(n)
	}
	return out
}

// checkQuery reports the first parameter of the raw query that ps does not
// name, or that is repeated without being a list, or that is malformed, as
// a *model.ValidationError naming it. Empty pairs ("a=1&&b=2") are
// skipped, as net/url skips them.
func checkQuery(raw string, ps []param) error {
	counts := make([]int, len(ps))
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		if strings.Contains(pair, ";") {
			return model.Invalid("query", pair, "a semicolon is not a separator: escape it (%3B)")
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return model.Invalid("query", k, "malformed parameter name: "+err.Error())
		}
		if _, err := url.QueryUnescape(v); err != nil {
			return model.Invalid(fieldName(name), v, "malformed value: "+err.Error())
		}
		i := indexOf(ps, name)
		switch {
		case name == "":
			return model.Invalid("query", pair, "a parameter without a name")
		case i < 0:
			return model.Invalid(fieldName(name), "", "unknown query parameter"+known(ps))
		case !ps[i].list && counts[i] > 0:
			return model.Invalid(name, "", "given more than once; it takes one value")
		}
		counts[i]++
	}
	return nil
}

func indexOf(ps []param, name string) int {
	for i, p := range ps {
		if p.name == name {
			return i
		}
	}
	return -1
}

// known lists the parameters ps names, for an error's reason.
func known(ps []param) string {
	if len(ps) == 0 {
		return ": this route takes none"
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = strconv.Quote(p.name)
	}
	return ": this route takes " + strings.Join(names, ", ")
}
