// Package deploy makes what running Tollgate on AWS needs besides the
// table itself: the IAM policies of its three personas (Policy: acquire,
// admin, worker), optionally confined to namespaces with
// dynamodb:LeadingKeys, and a CloudFormation template of the whole
// deployment (Template: the table, the aggregator and reconciler Lambda
// functions, their event source mapping and schedule, log groups, alarms,
// per-namespace managed policies). The IAM statements are made in one
// place (this package) and the template embeds them, so the two cannot
// drift; docs/operations.md explains both.
package deploy
