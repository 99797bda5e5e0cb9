# The events function (optional, var.events_rules): releases the
# reservations that infrastructure events name (package events,
# TOLLGATE_MODE=events), with an EventBridge rule per source and
# detail-type the rules match, as the CloudFormation template's Events*
# resources (deploy.EventPatterns; TestSettingsMatchTemplate compares
# them). A rule's `when` conditions are the function's to check: the
# patterns match on source and detail-type only, so they are never
# narrower than the rules.

locals {
  events       = var.events_rules == "" ? 0 : 1
  events_name  = "${var.name_prefix}-events"
  events_rules = var.events_rules == "" ? [] : yamldecode(var.events_rules).rules
  # A rule without a detail_type takes every event of its source.
  events_wide_sources = distinct([for r in local.events_rules : r.source if lookup(r, "detail_type", "") == ""])
  events_patterns = distinct([for r in local.events_rules : {
    source      = r.source
    detail_type = contains(local.events_wide_sources, r.source) ? "" : lookup(r, "detail_type", "")
  }])
  events_rule_patterns = { for i, p in local.events_patterns : format("%d", i + 1) => jsonencode({
    for k, v in { source = [p.source], "detail-type" = [p.detail_type] } : k => v if v[0] != ""
  }) }
}

resource "aws_cloudwatch_log_group" "events" {
  count             = local.events
  name              = "/aws/lambda/${local.events_name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_lambda_function" "events" {
  count            = local.events
  function_name    = local.events_name
  description      = "Tollgate events: releases the reservations infrastructure events name (package events)"
  role             = aws_iam_role.functions.arn
  filename         = var.lambda_zip_path
  source_code_hash = filebase64sha256(var.lambda_zip_path)
  runtime          = local.lambda_runtime
  architectures    = [local.lambda_architecture]
  handler          = local.lambda_handler
  memory_size      = var.lambda_memory_size
  timeout          = var.lambda_timeout

  environment {
    variables = merge({
      TOLLGATE_MODE        = "events"
      TOLLGATE_TABLE       = aws_dynamodb_table.tollgate.name
      TOLLGATE_EVENT_RULES = jsonencode(yamldecode(var.events_rules))
    }, var.events_namespace == "" ? {} : { TOLLGATE_NAMESPACE = var.events_namespace })
  }

  tags = var.tags

  depends_on = [aws_cloudwatch_log_group.events, aws_iam_role_policy_attachment.functions, aws_dynamodb_table_item.schema_version]
}

resource "aws_cloudwatch_event_rule" "events" {
  for_each      = local.events_rule_patterns
  name          = "${local.events_name}-${each.key}"
  description   = "Hands ${local.events_name} the events its rules may match"
  event_pattern = each.value
  tags          = var.tags
}

resource "aws_cloudwatch_event_target" "events" {
  for_each = local.events_rule_patterns
  rule     = aws_cloudwatch_event_rule.events[each.key].name
  arn      = aws_lambda_function.events[0].arn
}

resource "aws_lambda_permission" "events" {
  for_each      = local.events_rule_patterns
  statement_id  = "AllowEventBridgeRule${each.key}"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.events[0].function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.events[each.key].arn
}
