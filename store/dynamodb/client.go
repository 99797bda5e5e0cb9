package dynamodb

import (
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
)

// client is the table and the calls every part of the backend makes to
// it: the Store's control plane, its write engine (engine.go) and its
// administration (Admin) share the one New makes.
type client struct {
	db    *dynamodb.Client
	table string

	// The retry budget of one operation (retry.go): maxAttempts attempts,
	// whose backoffs sleep.
	maxAttempts int
	sleep       sleepFunc

	// nsIndexSpread is set once the table's version record is seen to say
	// that no GSI4 entry is left under a legacy key (nsindex.go).
	nsIndexSpread atomic.Bool
}

// newBudget returns the retry budget of one operation.
func (c *client) newBudget() *budget { return &budget{max: c.maxAttempts, sleep: c.sleep} }

// auditPut is the transaction item that appends ev: control-plane changes
// and bucket writes (a durable acquire, a lease ending, a reset) write
// their events in the transaction of their change.
func (c *client) auditPut(ns string, ev model.AuditEvent) (types.TransactWriteItem, error) {
	it, err := encodeAudit(ns, ev)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{TableName: &c.table, Item: it}}, nil
}
