# The aggregator (the table's stream -> usage snapshots and hot-bucket
# splits) and the reconciler (ends expired durable leases on a schedule):
# one zip from `make lambda`, two functions differing in TOLLGATE_MODE
# (cmd/tollgate-lambda, docs/aggregator.md "Deploying as AWS Lambda").

locals {
  # What `make lambda` builds: one static linux/arm64 executable named
  # bootstrap, for the OS-only runtime. The tests compare these with the
  # Makefile and cmd/tollgate-lambda.
  lambda_runtime      = "provided.al2023"
  lambda_architecture = "arm64"
  lambda_handler      = "bootstrap"

  aggregator_name = "${var.name_prefix}-aggregator"
  reconciler_name = "${var.name_prefix}-reconciler"
}

# ---------------------------------------------------------------- aggregator

resource "aws_cloudwatch_log_group" "aggregator" {
  name              = "/aws/lambda/${local.aggregator_name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_lambda_function" "aggregator" {
  function_name    = local.aggregator_name
  description      = "Tollgate aggregator: usage snapshots and hot-bucket splits from the stream of ${var.table_name}"
  role             = aws_iam_role.functions.arn
  filename         = var.lambda_zip_path
  source_code_hash = filebase64sha256(var.lambda_zip_path)
  runtime          = local.lambda_runtime
  architectures    = [local.lambda_architecture]
  handler          = local.lambda_handler
  memory_size      = var.lambda_memory_size
  timeout          = var.lambda_timeout

  environment {
    variables = {
      TOLLGATE_MODE               = "aggregate"
      TOLLGATE_TABLE              = aws_dynamodb_table.tollgate.name
      TOLLGATE_RETENTION          = var.usage_retention
      TOLLGATE_UPKEEP             = tostring(var.upkeep)
      TOLLGATE_RECONCILE_INTERVAL = var.aggregator_reconcile_interval
    }
  }

  tags = var.tags

  # The log group first, or Lambda creates one that never expires; the
  # version record before the first start (CheckTable).
  depends_on = [aws_cloudwatch_log_group.aggregator, aws_iam_role_policy_attachment.functions, aws_dynamodb_table_item.schema_version]
}

# Batches Lambda gave up on (retry limit or record age reached; the
# batch's usage is not counted) are described here: records' stream
# positions, not their contents.
resource "aws_sqs_queue" "aggregator_failures" {
  name                      = "${local.aggregator_name}-failures"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

resource "aws_lambda_event_source_mapping" "aggregator" {
  function_name                      = aws_lambda_function.aggregator.arn
  event_source_arn                   = aws_dynamodb_table.tollgate.stream_arn
  starting_position                  = "TRIM_HORIZON"
  batch_size                         = var.stream_batch_size
  maximum_batching_window_in_seconds = var.stream_batching_window_seconds
  tumbling_window_in_seconds         = var.stream_tumbling_window_seconds
  parallelization_factor             = var.stream_parallelization_factor
  bisect_batch_on_function_error     = true
  maximum_retry_attempts             = var.stream_maximum_retry_attempts
  maximum_record_age_in_seconds      = var.stream_maximum_record_age_seconds

  destination_config {
    on_failure {
      destination_arn = aws_sqs_queue.aggregator_failures.arn
    }
  }

  depends_on = [aws_iam_role_policy_attachment.functions]
}

# ---------------------------------------------------------------- reconciler

resource "aws_cloudwatch_log_group" "reconciler" {
  count             = var.reconciler_enabled ? 1 : 0
  name              = "/aws/lambda/${local.reconciler_name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_lambda_function" "reconciler" {
  count            = var.reconciler_enabled ? 1 : 0
  function_name    = local.reconciler_name
  description      = "Tollgate reconciler: ends the expired durable leases of ${var.table_name}"
  role             = aws_iam_role.functions.arn
  filename         = var.lambda_zip_path
  source_code_hash = filebase64sha256(var.lambda_zip_path)
  runtime          = local.lambda_runtime
  architectures    = [local.lambda_architecture]
  handler          = local.lambda_handler
  memory_size      = var.lambda_memory_size
  timeout          = var.lambda_timeout

  environment {
    variables = {
      TOLLGATE_MODE  = "reconcile"
      TOLLGATE_TABLE = aws_dynamodb_table.tollgate.name
    }
  }

  tags = var.tags

  depends_on = [aws_cloudwatch_log_group.reconciler, aws_iam_role_policy_attachment.functions, aws_dynamodb_table_item.schema_version]
}

# A failed pass is not retried: the next scheduled one does its work.
resource "aws_lambda_function_event_invoke_config" "reconciler" {
  count                        = var.reconciler_enabled ? 1 : 0
  function_name                = aws_lambda_function.reconciler[0].function_name
  maximum_retry_attempts       = 0
  maximum_event_age_in_seconds = 60
}

resource "aws_cloudwatch_event_rule" "reconcile" {
  count               = var.reconciler_enabled ? 1 : 0
  name                = "${local.reconciler_name}-schedule"
  description         = "Invokes ${local.reconciler_name}: one reconciler pass each time"
  schedule_expression = var.reconcile_schedule
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "reconcile" {
  count = var.reconciler_enabled ? 1 : 0
  rule  = aws_cloudwatch_event_rule.reconcile[0].name
  arn   = aws_lambda_function.reconciler[0].arn
}

resource "aws_lambda_permission" "reconcile" {
  count         = var.reconciler_enabled ? 1 : 0
  statement_id  = "AllowEventBridgeSchedule"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.reconciler[0].function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.reconcile[0].arn
}
