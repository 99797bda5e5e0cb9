package deploy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// Persona is who a policy is for: the three kinds of principal that use a
// Tollgate table.
type Persona string

// Personas.
const (
	// PersonaAcquire is an application's runtime (the library, tollgate
	// serve answering acquire-role keys): acquire, leases, reservations,
	// availability, capacity. With namespace ids, confined to them.
	PersonaAcquire Persona = "acquire"
	// PersonaAdmin manages entities, limits, audit and usage. With
	// namespace ids it is a tenant's administrator, confined to them;
	// without, the operator: every namespace, the registry (register,
	// delete and purge namespaces) and the table's lifecycle short of
	// deleting it (tollgate deploy, status).
	PersonaAdmin Persona = "admin"
	// PersonaWorker is the aggregator and the reconciler (tollgate
	// aggregator, tollgate reconcile, the Lambda functions): they read the
	// table's stream and work on every namespace, so a worker policy is
	// never confined.
	PersonaWorker Persona = "worker"
)

// Personas lists the personas, in the order the CLI shows them.
func Personas() []Persona { return []Persona{PersonaAcquire, PersonaAdmin, PersonaWorker} }

// PolicyOptions says which tables and namespaces a policy is for.
type PolicyOptions struct {
	// Tables are the ARNs of the tables
	// (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME); at least one.
	Tables []string
	// NamespaceIDs confine the acquire and admin personas to these
	// namespaces (ids, not names: tollgate namespace show NAME). Empty:
	// every namespace. The worker persona refuses them.
	NamespaceIDs []string
}

// Document is an IAM policy document.
type Document struct {
	Version   string      `json:"Version"`
	Statement []Statement `json:"Statement"`
}

// Statement is one statement of a Document. Resource entries are ARN
// strings, or CloudFormation intrinsic functions in the template.
type Statement struct {
	Sid       string                         `json:"Sid"`
	Effect    string                         `json:"Effect"`
	Action    []string                       `json:"Action"`
	Resource  []any                          `json:"Resource"`
	Condition map[string]map[string][]string `json:"Condition,omitempty"`
}

// InvalidOptionError is returned for options a policy or template cannot
// be made of. Option names the option as the CLI's flag does ("table",
// "namespace-id", "persona", ...).
type InvalidOptionError struct {
	Option string
	Value  string
	Reason string
}

func (e *InvalidOptionError) Error() string {
	return fmt.Sprintf("deploy: --%s %q: %s", e.Option, e.Value, e.Reason)
}

func invalid(option, value, reason string) error {
	if len(value) > 80 {
		value = value[:80] + "..."
	}
	return &InvalidOptionError{Option: option, Value: value, Reason: reason}
}

// Item actions (docs/dynamodb.md 7). A transaction is authorised by the
// actions of its parts; there is no TransactWriteItems action.
var (
	readActions  = []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:ConditionCheckItem"}
	writeActions = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
	// tableAdminActions are the operator's, what store/dynamodb's
	// CreateTable and InitTable call (tollgate deploy: create, or initialise
	// a table a stack or Terraform made); status needs DescribeTable and
	// GetItem only. DeleteTable (tollgate destroy) is left to a break-glass
	// role.
	tableAdminActions = []string{"dynamodb:CreateTable", "dynamodb:UpdateTimeToLive"}
	streamActions     = []string{"dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"}
)

// tableRef renders a table's ARN followed by suffix ("", "/index/GSI2",
// "/stream/*"): a string for Policy, an intrinsic function in the template.
type tableRef func(suffix string) any

// Policy returns the IAM policy document, as indented JSON, that persona
// needs on the tables of opts: the single source of Tollgate's IAM
// statements, used by `tollgate iam policy`, by the CloudFormation template
// (Template) and meant for any other tool (Terraform: pass the JSON to
// aws_iam_policy's policy). Confined policies (opts.NamespaceIDs) restrict
// every item they reach to the namespaces' keys with dynamodb:LeadingKeys
// on dynamodb.NamespaceKeyPrefix (GSI4 on dynamodb.NamespaceIndexKeyPatterns) and
// allow reading the registry partition (dynamodb.RegistryPartitionKey). Bad
// options give an *InvalidOptionError.
func Policy(persona Persona, opts PolicyOptions) ([]byte, error) {
	doc, err := PolicyDocument(persona, opts)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(doc, "", "  ")
}

// PolicyDocument is Policy's document before it is encoded.
func PolicyDocument(persona Persona, opts PolicyOptions) (Document, error) {
	if len(opts.Tables) == 0 {
		return Document{}, invalid("table", "", "name at least one table ARN (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME)")
	}
	refs := make([]tableRef, len(opts.Tables))
	for i, arn := range opts.Tables {
		if err := validateTableARN(arn); err != nil {
			return Document{}, err
		}
		refs[i] = func(suffix string) any { return arn + suffix }
	}
	return document(persona, opts.NamespaceIDs, refs)
}

// BoundaryDocument is a permissions boundary for the roles of the tenants
// of opts.NamespaceIDs (required): the most any of them may be granted on
// the tables, i.e. the confined admin persona's statements, which include
// the acquire persona's. Set it as the permissions boundary of the roles a
// tenant team may create, so that no policy attached later reaches another
// namespace.
func BoundaryDocument(opts PolicyOptions) (Document, error) {
	if len(opts.NamespaceIDs) == 0 {
		return Document{}, invalid("namespace-id", "", "a permissions boundary confines namespaces: name at least one")
	}
	return PolicyDocument(PersonaAdmin, opts)
}

// tableARN is the form of a table's ARN: partition, region, account, name.
var tableARN = regexp.MustCompile(`^arn:aws(-[a-z]+)*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}$`)

func validateTableARN(arn string) error {
	if !tableARN.MatchString(arn) {
		return invalid("table", arn, "want a table ARN, arn:aws:dynamodb:REGION:ACCOUNT:table/NAME (no wildcards, no /index or /stream suffix)")
	}
	return nil
}

// namespaceID is what a namespace id may be in a policy: the registry
// makes 16 hex digits; wildcards (* ?) and "/" would widen the condition,
// and "_" is the registry's own partition.
var namespaceID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidateNamespaceID checks a namespace id given for a policy.
func ValidateNamespaceID(id string) error {
	if !namespaceID.MatchString(id) {
		return invalid("namespace-id", id, "want the namespace's id (16 hex digits: tollgate namespace show NAME), without wildcards or '/'")
	}
	return nil
}

// document builds persona's statements on the tables refs.
func document(persona Persona, nsIDs []string, refs []tableRef) (Document, error) {
	for _, id := range nsIDs {
		if err := ValidateNamespaceID(id); err != nil {
			return Document{}, err
		}
	}
	nsIDs = slices.Compact(slices.Sorted(slices.Values(nsIDs)))
	tables := resources(refs, "")
	var st []Statement
	switch persona {
	case PersonaAcquire, PersonaAdmin:
		if len(nsIDs) == 0 {
			st = unconfined(persona, refs)
			break
		}
		st = confined(persona, nsIDs, refs)
	case PersonaWorker:
		if len(nsIDs) > 0 {
			return Document{}, invalid("namespace-id", strings.Join(nsIDs, ","),
				"the worker persona (aggregator, reconciler) reads the whole stream and works on every namespace: it cannot be confined")
		}
		st = []Statement{
			allow("TollgateItems", concat(readActions, writeActions), resources(refs, "", "/index/*")),
			allow("TollgateStream", streamActions, resources(refs, "/stream/*")),
			// ListStreams takes no resource.
			allow("TollgateListStreams", []string{"dynamodb:ListStreams"}, []any{"*"}),
		}
	default:
		return Document{}, invalid("persona", string(persona), "want acquire, admin or worker")
	}
	st = append(st, allow("TollgateDescribeTable", []string{"dynamodb:DescribeTable"}, tables))
	return Document{Version: "2012-10-17", Statement: st}, nil
}

// unconfined are the statements of a persona on every namespace. The
// acquire persona reads every item but may not write the stored API keys'
// records by hash (dynamodb.KeyHashPartitionPrefix): one that could would
// forge a key of any namespace, an admin's included. Creating and revoking
// keys is the operator's (the admin persona) or the server's, which runs
// with the admin or the worker persona.
func unconfined(persona Persona, refs []tableRef) []Statement {
	actions := concat(readActions, writeActions)
	if persona == PersonaAcquire {
		return []Statement{
			allow("TollgateItems", readActions, resources(refs, "", "/index/*")),
			withCondition(allow("TollgateItemWrites", writeActions, resources(refs, "")),
				"ForAllValues:StringNotLike", []string{dynamodb.KeyHashPartitionPrefix() + "*"}),
		}
	}
	return []Statement{
		allow("TollgateItems", concat(actions, []string{"dynamodb:BatchWriteItem"}), resources(refs, "", "/index/*")),
		allow("TollgateTableAdmin", tableAdminActions, resources(refs, "")),
	}
}

// confined are the statements of a persona on the namespaces nsIDs only.
// ForAllValues is vacuously true for a request without a partition key:
// no action here may be one (Scan, PartiQL), and DescribeTable has a
// statement of its own.
func confined(persona Persona, nsIDs []string, refs []tableRef) []Statement {
	prefixes := make([]string, len(nsIDs))
	for i, id := range nsIDs {
		prefixes[i] = dynamodb.NamespaceKeyPrefix(id) + "*"
	}
	// acquire: capacity (GSI2) and reservations by entity (GSI3);
	// admin: children (GSI1) and entity deletion (GSI3) too.
	indexes := []string{"/index/GSI2", "/index/GSI3"}
	actions := concat(readActions, writeActions)
	if persona == PersonaAdmin {
		indexes = []string{"/index/GSI1", "/index/GSI2", "/index/GSI3"}
		actions = append(actions, "dynamodb:BatchWriteItem")
	}
	st := []Statement{
		withCondition(allow("TollgateNamespaceItems", actions, resources(refs, append([]string{""}, indexes...)...)),
			"ForAllValues:StringLike", prefixes),
	}
	if persona == PersonaAdmin {
		// ListEntities, ListConfigs and the audit log by time query GSI4,
		// keyed by "{id}#{part}" and, on tables not yet migrated, the
		// bare id: patterns matching those keys exactly.
		var keys []string
		for _, id := range nsIDs {
			keys = append(keys, dynamodb.NamespaceIndexKeyPatterns(id)...)
		}
		st = append(st, withCondition(allow("TollgateNamespaceIndex", []string{"dynamodb:Query"}, resources(refs, "/index/GSI4")),
			"ForAllValues:StringLike", keys))
	}
	// The namespace's name is resolved to its id, and the schema version
	// read, in the registry partition: readable, not writable (register
	// namespaces with the operator's policy).
	st = append(st, withCondition(allow("TollgateRegistryRead", []string{"dynamodb:GetItem"}, resources(refs, "")),
		"ForAllValues:StringEquals", []string{dynamodb.RegistryPartitionKey()}))
	// Every process polls the change generation; the admin persona's
	// changes raise it in their own transactions (an UpdateItem there).
	// The keys' records by hash stay out of reach: a tenant creates keys
	// through the server.
	changes := []string{"dynamodb:GetItem"}
	if persona == PersonaAdmin {
		changes = append(changes, "dynamodb:UpdateItem")
	}
	return append(st, withCondition(allow("TollgateChanges", changes, resources(refs, "")),
		"ForAllValues:StringEquals", []string{dynamodb.ChangesPartitionKey()}))
}

func allow(sid string, actions []string, res []any) Statement {
	return Statement{Sid: sid, Effect: "Allow", Action: actions, Resource: res}
}

func withCondition(s Statement, op string, leadingKeys []string) Statement {
	s.Condition = map[string]map[string][]string{op: {"dynamodb:LeadingKeys": leadingKeys}}
	return s
}

// resources renders every table with every suffix.
func resources(refs []tableRef, suffixes ...string) []any {
	var out []any
	for _, r := range refs {
		for _, s := range suffixes {
			out = append(out, r(s))
		}
	}
	return out
}

func concat(a, b []string) []string { return append(slices.Clip(a), b...) }
