output "table_name" {
  description = "The table: TOLLGATE_TABLE, `tollgate --table`, dynamodb.ConnectConfig.Table."
  value       = aws_dynamodb_table.tollgate.name
}

output "table_arn" {
  description = "The table's ARN."
  value       = aws_dynamodb_table.tollgate.arn
}

output "table_stream_arn" {
  description = "The table's stream (NEW_AND_OLD_IMAGES), read by the aggregator."
  value       = aws_dynamodb_table.tollgate.stream_arn
}

output "aggregator_function_name" {
  description = "The aggregator function."
  value       = aws_lambda_function.aggregator.function_name
}

output "aggregator_function_arn" {
  description = "The aggregator function's ARN."
  value       = aws_lambda_function.aggregator.arn
}

output "reconciler_function_name" {
  description = "The reconciler function (null when reconciler_enabled is false)."
  value       = one(aws_lambda_function.reconciler[*].function_name)
}

output "aggregator_failure_queue_url" {
  description = "The queue of discarded stream batches (the event source mapping's on-failure destination)."
  value       = aws_sqs_queue.aggregator_failures.url
}

output "alarm_topic_arn" {
  description = "The topic the alarms notify (created, or alarm_topic_arn; null: none)."
  value       = local.alarm_topic_arn
}

output "functions_role_arn" {
  description = "The execution role of the aggregator and reconciler."
  value       = aws_iam_role.functions.arn
}

output "admin_policy_arn" {
  description = "The admin policy: attach it to operators' roles (tollgate namespace, deploy, purge)."
  value       = aws_iam_policy.admin.arn
}

output "admin_role_arn" {
  description = "The admin role (null without admin_principal_arns)."
  value       = one(aws_iam_role.admin[*].arn)
}

output "tenant_role_arns" {
  description = "Each tenant's role, by tenant key."
  value       = { for k, r in aws_iam_role.tenant : k => r.arn }
}

output "tenant_policy_arns" {
  description = "Each tenant's policy, by tenant key."
  value       = { for k, p in aws_iam_policy.tenant : k => p.arn }
}

output "tenant_acquire_policy_arns" {
  description = "Each tenant's acquire policy (the acquire persona confined to its namespaces), by tenant key: attach it to its applications' roles."
  value       = { for k, p in aws_iam_policy.tenant_acquire : k => p.arn }
}

output "tenant_policy_json" {
  description = "Each tenant's policy document, by tenant key (check it with the IAM policy simulator: docs/dynamodb.md 7)."
  value       = { for k, d in data.aws_iam_policy_document.tenant : k => d.json }
}

output "server_url" {
  description = "The server's address, for the clients (TOLLGATE_SERVER); null without server_image."
  value       = one([for lb in aws_lb.server : "${local.server_https ? "https" : "http"}://${lb.dns_name}"])
}

output "server_cluster_name" {
  description = "The server's ECS cluster (null without server_image)."
  value       = one(aws_ecs_cluster.server[*].name)
}

output "server_service_name" {
  description = "The server's ECS service (null without server_image): aws ecs update-service --desired-count N scales it."
  value       = one(aws_ecs_service.server[*].name)
}

output "events_function_name" {
  description = "The events function (null without events_rules)."
  value       = one(aws_lambda_function.events[*].function_name)
}
