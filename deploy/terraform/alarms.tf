# CloudWatch alarms: DynamoDB throttling and system errors on the table,
# the aggregator's stream lag, the functions' errors and throttles, and
# batches discarded to the failure queue. They notify the created topic,
# or var.alarm_topic_arn, or nobody.

resource "aws_sns_topic" "alarms" {
  count = var.create_alarm_topic ? 1 : 0
  name  = "${var.name_prefix}-alarms"
  tags  = var.tags
}

locals {
  alarm_topic_arn = var.create_alarm_topic ? one(aws_sns_topic.alarms[*].arn) : var.alarm_topic_arn
  alarm_actions   = local.alarm_topic_arn == null ? [] : [local.alarm_topic_arn]

  # DynamoDB reports ThrottledRequests and SystemErrors per table and
  # operation only: the alarms add up the operations Tollgate calls (at
  # most 10 metrics per alarm, the expression included). The list is
  # dynamodb.Operations() (store/dynamodb), which a test keeps equal to
  # the backend's calls; TestSettingsMatchTemplate compares this with it.
  table_operations = ["GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem", "BatchWriteItem", "Query", "TransactWriteItems"]

  table_alarms = {
    "throttled-requests" = {
      metric      = "ThrottledRequests"
      threshold   = var.alarm_throttled_requests_threshold
      description = "DynamoDB throttled requests on ${var.table_name}. Tollgate retries them with backoff; a request that keeps being throttled is an unavailable error (the limit's on_unavailable policy applies)."
    }
    "system-errors" = {
      metric      = "SystemErrors"
      threshold   = var.alarm_system_errors_threshold
      description = "DynamoDB system errors (HTTP 500) on ${var.table_name}."
    }
  }

  functions = merge(
    { aggregator = aws_lambda_function.aggregator.function_name },
    var.reconciler_enabled ? { reconciler = one(aws_lambda_function.reconciler[*].function_name) } : {},
    local.events == 1 ? { events = one(aws_lambda_function.events[*].function_name) } : {},
  )
}

resource "aws_cloudwatch_metric_alarm" "table" {
  for_each            = var.alarms_enabled ? local.table_alarms : {}
  alarm_name          = "${var.name_prefix}-dynamodb-${each.key}"
  alarm_description   = each.value.description
  comparison_operator = "GreaterThanThreshold"
  evaluation_periods  = var.alarm_evaluation_periods
  datapoints_to_alarm = var.alarm_datapoints_to_alarm
  threshold           = each.value.threshold
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags

  metric_query {
    id          = "total"
    expression  = "SUM([${join(",", [for i, op in local.table_operations : "m${i}"])}])"
    label       = "${each.value.metric} (all operations)"
    return_data = true
  }

  dynamic "metric_query" {
    for_each = local.table_operations
    content {
      id          = "m${metric_query.key}"
      return_data = false

      metric {
        namespace   = "AWS/DynamoDB"
        metric_name = each.value.metric
        period      = var.alarm_period_seconds
        stat        = "Sum"
        dimensions = {
          TableName = aws_dynamodb_table.tollgate.name
          Operation = metric_query.value
        }
      }
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "iterator_age" {
  count               = var.alarms_enabled ? 1 : 0
  alarm_name          = "${var.name_prefix}-aggregator-iterator-age"
  alarm_description   = "The aggregator is behind the stream of ${var.table_name}: usage snapshots are late, and records older than 24 hours are lost."
  namespace           = "AWS/Lambda"
  metric_name         = "IteratorAge"
  statistic           = "Maximum"
  period              = var.alarm_period_seconds
  evaluation_periods  = var.alarm_evaluation_periods
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.alarm_iterator_age_ms
  treat_missing_data  = "notBreaching"
  dimensions = {
    FunctionName = aws_lambda_function.aggregator.function_name
  }
  alarm_actions = local.alarm_actions
  ok_actions    = local.alarm_actions
  tags          = var.tags
}

resource "aws_cloudwatch_metric_alarm" "function_errors" {
  for_each            = var.alarms_enabled ? local.functions : {}
  alarm_name          = "${var.name_prefix}-${each.key}-errors"
  alarm_description   = "Failed invocations of ${each.value} (see its log group)."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  statistic           = "Sum"
  period              = var.alarm_period_seconds
  evaluation_periods  = var.alarm_evaluation_periods
  datapoints_to_alarm = var.alarm_datapoints_to_alarm
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.alarm_lambda_errors_threshold
  treat_missing_data  = "notBreaching"
  dimensions = {
    FunctionName = each.value
  }
  alarm_actions = local.alarm_actions
  ok_actions    = local.alarm_actions
  tags          = var.tags
}

resource "aws_cloudwatch_metric_alarm" "function_throttles" {
  for_each            = var.alarms_enabled ? local.functions : {}
  alarm_name          = "${var.name_prefix}-${each.key}-throttles"
  alarm_description   = "Throttled invocations of ${each.value} (account or reserved concurrency)."
  namespace           = "AWS/Lambda"
  metric_name         = "Throttles"
  statistic           = "Sum"
  period              = var.alarm_period_seconds
  evaluation_periods  = var.alarm_evaluation_periods
  datapoints_to_alarm = var.alarm_datapoints_to_alarm
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.alarm_lambda_throttles_threshold
  treat_missing_data  = "notBreaching"
  dimensions = {
    FunctionName = each.value
  }
  alarm_actions = local.alarm_actions
  ok_actions    = local.alarm_actions
  tags          = var.tags
}

resource "aws_cloudwatch_metric_alarm" "discarded_batches" {
  count               = var.alarms_enabled ? 1 : 0
  alarm_name          = "${var.name_prefix}-aggregator-discarded-batches"
  alarm_description   = "Lambda discarded stream batches of ${var.table_name} after their retries: their usage is not counted. The queue names their records."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  dimensions = {
    QueueName = aws_sqs_queue.aggregator_failures.name
  }
  alarm_actions = local.alarm_actions
  ok_actions    = local.alarm_actions
  tags          = var.tags
}
