package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
)

// The wire types and error codes of this package, held to the schemas of
// OpenAPI (package server holds the routes, examples and live answers to
// it).

// openAPISchemas returns the description's components/schemas.
func openAPISchemas(t *testing.T) map[string]map[string]any {
	t.Helper()
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(OpenAPI), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc.Components.Schemas
}

// properties returns the property names of schema name, those of the
// schemas its allOf refers to included.
func properties(t *testing.T, schemas map[string]map[string]any, name string) []string {
	t.Helper()
	sch, ok := schemas[name]
	if !ok {
		t.Fatalf("no schema %s", name)
	}
	var out []string
	props, _ := sch["properties"].(map[string]any)
	for p := range props {
		out = append(out, p)
	}
	all, _ := sch["allOf"].([]any)
	for _, a := range all {
		ref, _ := a.(map[string]any)["$ref"].(string)
		out = append(out, properties(t, schemas, strings.TrimPrefix(ref, "#/components/schemas/"))...)
	}
	slices.Sort(out)
	return out
}

// jsonFields returns the JSON field names of struct type typ, those of
// embedded structs included.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for f := range typ.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "-" && f.IsExported() {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func TestOpenAPISchemasHaveTheWireFields(t *testing.T) {
	schemas := openAPISchemas(t)
	for _, tc := range []struct {
		schema string
		value  any
	}{
		{"AcquireRequest", AcquireRequest{}},
		{"AcquireResponse", AcquireResponse{}},
		{"LimitStatus", LimitStatus{}},
		{"AdjustRequest", AdjustRequest{}},
		{"ExtendRequest", ExtendRequest{}},
		{"Lease", LeaseResponse{}},
		{"AvailableResponse", AvailableResponse{}},
		{"Entity", Entity{}},
		{"EntityList", EntitiesResponse{}},
		{"EntityPatch", EntityPatch{}},
		{"Limits", Limits{}},
		{"ScopedLimits", ScopedLimits{}},
		{"LimitsList", LimitsListResponse{}},
		{"AuditEvent", AuditEvent{}},
		{"AuditPage", AuditResponse{}},
		{"Namespace", Namespace{}},
		{"AuditRetention", AuditRetention{}},
		{"NamespaceList", NamespacesResponse{}},
		{"PurgeResponse", PurgeResponse{}},
		{"Error", Error{}},
		{"Usage", Usage{}},
		{"UsagePage", UsageResponse{}},
		{"UsageSummary", UsageSummary{}},
		{"LimitUsage", LimitUsage{}},
		{"Capacity", Capacity{}},
		{"LimitCapacity", LimitCapacity{}},
		{"ReserveRequest", ReserveRequest{}},
		{"Reservation", Reservation{}},
		{"ReserveResponse", ReserveResponse{}},
		{"ReservationPage", ReservationsResponse{}},
		{"Penalty", Penalty{}},
		{"PenalizeRequest", PenalizeRequest{}},
		{"TopDenied", TopDeniedResponse{}},
		{"DeniedEntity", DeniedEntity{}},
		{"Alert", Alert{}},
	} {
		t.Run(tc.schema, func(t *testing.T) {
			got, want := properties(t, schemas, tc.schema), jsonFields(reflect.TypeOf(tc.value))
			if !slices.Equal(got, want) {
				t.Errorf("schema properties %v, want the fields of %T: %v", got, tc.value, want)
			}
		})
	}
}

func TestOpenAPIErrorCodesAndReasons(t *testing.T) {
	errSchema := openAPISchemas(t)["Error"]
	props, _ := errSchema["properties"].(map[string]any)
	code, _ := props["error"].(map[string]any)
	var enum []string
	for _, c := range code["enum"].([]any) {
		enum = append(enum, c.(string))
	}
	reasonDoc, _ := props["reason"].(map[string]any)["description"].(string)

	codes := map[string]bool{}
	for _, err := range []error{&model.RateLimitExceeded{}, &model.ValidationError{}, model.ErrUnavailable, errors.New("anything else")} {
		_, body := ErrorBody(err)
		codes[body.Code] = true
	}
	for _, k := range kinds {
		codes[k.code] = true
		if k.reason != "" && !strings.Contains(reasonDoc, "`"+k.reason+"`") {
			t.Errorf("reason %s (%s) is not in the Error schema's reason", k.reason, k.code)
		}
	}
	for c := range codes {
		if !slices.Contains(enum, c) {
			t.Errorf("code %s is not in the Error schema's enum %v", c, enum)
		}
	}
	for _, c := range enum {
		if !codes[c] {
			t.Errorf("the Error schema's enum has %s, which ErrorBody never answers", c)
		}
	}
}

// The server refuses null anywhere in a request body: no request schema
// admits it.
func TestOpenAPIRequestsAdmitNoNull(t *testing.T) {
	schemas := openAPISchemas(t)
	for _, name := range []string{"AcquireRequest", "AdjustRequest", "ExtendRequest", "Entity", "EntityPatch", "Limits",
		"ReserveRequest", "PenaltyFields", "Penalty", "PenalizeRequest", "NamespaceCreate", "Consume"} {
		sch, ok := schemas[name]
		if !ok {
			t.Fatalf("no schema %s", name)
		}
		data, _ := json.Marshal(sch)
		if strings.Contains(string(data), `"null"`) {
			t.Errorf("schema %s admits null: %s", name, data)
		}
	}
}
