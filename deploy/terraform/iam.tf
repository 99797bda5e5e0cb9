# The personas of package deploy (deploy.Policy, `tollgate iam policy`,
# docs/dynamodb.md 7), written in HCL:
#   - the functions (aggregator and reconciler): the worker persona, plus
#     their logs and failure queue;
#   - admin: the admin persona on every namespace (the operator);
#   - tenants: one role each with the admin persona confined by
#     dynamodb:LeadingKeys to its namespaces, and a policy of the acquire
#     persona confined alike for its applications.
# deploy.PolicyDocument is the source: TestPoliciesMatchGenerator
# evaluates every document below and compares its statements (actions,
# resources, conditions) with the generator's for the same table and
# namespace ids, so an edit here that the generator does not make fails.
# Every role takes var.permissions_boundary_arn.

locals {
  table_arn = aws_dynamodb_table.tollgate.arn

  # The item actions of every persona (deploy/iam.go: readActions,
  # writeActions). There is no dynamodb:TransactWriteItems action: a
  # transaction needs the actions of its parts (DeleteItem,
  # ConditionCheckItem among them). BatchWriteItem, which only entity
  # deletion and namespace purge call, is the admin persona's alone.
  read_actions  = ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:ConditionCheckItem"]
  write_actions = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"]
  item_actions  = concat(local.read_actions, local.write_actions)
  admin_actions = concat(local.item_actions, ["dynamodb:BatchWriteItem"])

  # What tollgate deploy calls (store/dynamodb CreateTable, InitTable).
  # DeleteTable is left to a break-glass role.
  table_admin_actions = ["dynamodb:CreateTable", "dynamodb:UpdateTimeToLive"]

  # The key layout a tenant's policy depends on; the tests compare it with
  # store/dynamodb (NamespaceKeyPrefix, NamespaceIndexKeys,
  # NamespaceIndexes, RegistryPartitionKey). Every partition key of a
  # namespace's items starts with "{id}/", and so do the partition keys of
  # its entries in GSI1-GSI3; GSI4's are "{id}#0" to "{id}#f" and, for
  # items an older Tollgate wrote, the bare id (ListEntities, ListConfigs
  # and the audit log query them).
  namespace_key_separator = "/"
  tenant_indexes          = ["GSI1", "GSI2", "GSI3"]
  acquire_indexes         = ["GSI2", "GSI3"]
  namespace_index         = "GSI4"
  namespace_index_part    = "#?" # "{id}#?": the id's 16 GSI4 parts, {id}#0 to {id}#f
  registry_partition_key  = "_/SYSTEM#"
  # The change generation every process polls (store/dynamodb
  # ChangesPartitionKey). A tenant never reaches the stored API keys'
  # records by hash ("_/KEY#..."): one that could write them would forge
  # a key of any namespace.
  changes_partition_key = "_/CHANGES#"
}

# ---------------------------------------------------------------- the functions

data "aws_iam_policy_document" "lambda_assume" {
  statement {
    sid     = "LambdaAssume"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "functions" {
  statement {
    sid       = "TollgateItems"
    effect    = "Allow"
    actions   = local.item_actions
    resources = [local.table_arn, "${local.table_arn}/index/*"]
  }

  # The aggregator process reads the stream; Lambda polls it with the
  # function's role.
  statement {
    sid       = "TollgateStream"
    effect    = "Allow"
    actions   = ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"]
    resources = ["${local.table_arn}/stream/*"]
  }

  # ListStreams takes no resource.
  statement {
    sid       = "TollgateListStreams"
    effect    = "Allow"
    actions   = ["dynamodb:ListStreams"]
    resources = ["*"]
  }

  statement {
    sid       = "TollgateDescribeTable"
    effect    = "Allow"
    actions   = ["dynamodb:DescribeTable"]
    resources = [local.table_arn]
  }

  # Not the worker persona's: what the functions need as Lambda functions
  # (the CloudFormation template's tollgate-lambda policy). The event
  # source mapping's on-failure destination is written with the
  # function's role.
  statement {
    sid       = "FailedBatches"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.aggregator_failures.arn]
  }

  statement {
    sid     = "Logs"
    effect  = "Allow"
    actions = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = concat(
      ["${aws_cloudwatch_log_group.aggregator.arn}:*"],
      [for g in aws_cloudwatch_log_group.reconciler : "${g.arn}:*"],
      [for g in aws_cloudwatch_log_group.events : "${g.arn}:*"],
    )
  }
}

resource "aws_iam_role" "functions" {
  name                 = "${var.name_prefix}-functions"
  description          = "Tollgate aggregator and reconciler functions"
  assume_role_policy   = data.aws_iam_policy_document.lambda_assume.json
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_policy" "functions" {
  name        = "${var.name_prefix}-functions"
  description = "Tollgate aggregator and reconciler: every item of ${var.table_name}, its stream, their logs"
  policy      = data.aws_iam_policy_document.functions.json
  tags        = var.tags
}

resource "aws_iam_role_policy_attachment" "functions" {
  role       = aws_iam_role.functions.name
  policy_arn = aws_iam_policy.functions.arn
}

# ---------------------------------------------------------------- admin

data "aws_iam_policy_document" "admin" {
  # Every item: namespace registration (transactions on _/SYSTEM#),
  # PurgeNamespace (GSI4), entities, limits, usage, audit of any namespace.
  statement {
    sid       = "TollgateItems"
    effect    = "Allow"
    actions   = local.admin_actions
    resources = [local.table_arn, "${local.table_arn}/index/*"]
  }

  # tollgate deploy.
  statement {
    sid       = "TollgateTableAdmin"
    effect    = "Allow"
    actions   = local.table_admin_actions
    resources = [local.table_arn]
  }

  statement {
    sid       = "TollgateDescribeTable"
    effect    = "Allow"
    actions   = ["dynamodb:DescribeTable"]
    resources = [local.table_arn]
  }
}

resource "aws_iam_policy" "admin" {
  name        = "${var.name_prefix}-admin"
  description = "Tollgate admin: every namespace of ${var.table_name}, registration, purge, table management"
  policy      = data.aws_iam_policy_document.admin.json
  tags        = var.tags
}

data "aws_iam_policy_document" "admin_assume" {
  count = length(var.admin_principal_arns) > 0 ? 1 : 0

  statement {
    sid     = "AdminAssume"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "AWS"
      identifiers = var.admin_principal_arns
    }
  }
}

resource "aws_iam_role" "admin" {
  count                = length(var.admin_principal_arns) > 0 ? 1 : 0
  name                 = "${var.name_prefix}-admin"
  description          = "Tollgate admin"
  assume_role_policy   = data.aws_iam_policy_document.admin_assume[0].json
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy_attachment" "admin" {
  count      = length(var.admin_principal_arns) > 0 ? 1 : 0
  role       = aws_iam_role.admin[0].name
  policy_arn = aws_iam_policy.admin.arn
}

# ---------------------------------------------------------------- tenants

data "aws_iam_policy_document" "tenant" {
  for_each = var.tenants

  # Items whose partition key (or, in a query of GSI1-GSI3, the index's
  # partition key) starts with one of the tenant's namespace ids. Never
  # add Scan or PartiQL here: ForAllValues is true for a request without
  # a partition key.
  statement {
    sid     = "TollgateNamespaceItems"
    effect  = "Allow"
    actions = local.admin_actions
    resources = concat(
      [local.table_arn],
      [for ix in local.tenant_indexes : "${local.table_arn}/index/${ix}"],
    )

    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = [for id in each.value.namespace_ids : "${id}${local.namespace_key_separator}*"]
    }
  }

  # ListEntities, ListConfigs and the audit log by time query GSI4, keyed
  # by "{id}#{part}" and, on tables not yet migrated, the bare id.
  statement {
    sid       = "TollgateNamespaceIndex"
    effect    = "Allow"
    actions   = ["dynamodb:Query"]
    resources = ["${local.table_arn}/index/${local.namespace_index}"]

    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = flatten([for id in each.value.namespace_ids : ["${id}${local.namespace_index_part}", id]])
    }
  }

  # The limiter resolves its namespace's name here, and CheckTable reads
  # the schema version. LeadingKeys cannot restrict the sort key: a tenant
  # can read every namespace's name and id (not their data).
  statement {
    sid       = "TollgateRegistryRead"
    effect    = "Allow"
    actions   = ["dynamodb:GetItem"]
    resources = [local.table_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = [local.registry_partition_key]
    }
  }

  # Every process polls the change generation; the tenant's changes of
  # configs, entities and keys raise it in their own transactions.
  statement {
    sid       = "TollgateChanges"
    effect    = "Allow"
    actions   = ["dynamodb:GetItem", "dynamodb:UpdateItem"]
    resources = [local.table_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = [local.changes_partition_key]
    }
  }

  # Its own statement: DescribeTable has no partition key.
  statement {
    sid       = "TollgateDescribeTable"
    effect    = "Allow"
    actions   = ["dynamodb:DescribeTable"]
    resources = [local.table_arn]
  }
}

# The acquire persona confined to a tenant's namespaces: for the roles of
# its applications (attach tenant_acquire_policy_arns), as the
# CloudFormation template's TenantAcquirePolicy.
data "aws_iam_policy_document" "tenant_acquire" {
  for_each = var.tenants

  statement {
    sid     = "TollgateNamespaceItems"
    effect  = "Allow"
    actions = local.item_actions
    resources = concat(
      [local.table_arn],
      [for ix in local.acquire_indexes : "${local.table_arn}/index/${ix}"],
    )

    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = [for id in each.value.namespace_ids : "${id}${local.namespace_key_separator}*"]
    }
  }

  statement {
    sid       = "TollgateRegistryRead"
    effect    = "Allow"
    actions   = ["dynamodb:GetItem"]
    resources = [local.table_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = [local.registry_partition_key]
    }
  }

  # The change generation: read only.
  statement {
    sid       = "TollgateChanges"
    effect    = "Allow"
    actions   = ["dynamodb:GetItem"]
    resources = [local.table_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = [local.changes_partition_key]
    }
  }

  statement {
    sid       = "TollgateDescribeTable"
    effect    = "Allow"
    actions   = ["dynamodb:DescribeTable"]
    resources = [local.table_arn]
  }
}

resource "aws_iam_policy" "tenant_acquire" {
  for_each    = var.tenants
  name        = "${var.name_prefix}-tenant-${each.key}-acquire"
  description = "Tollgate acquire persona of tenant ${each.key}: namespaces ${join(", ", each.value.namespace_ids)} of ${var.table_name}"
  policy      = data.aws_iam_policy_document.tenant_acquire[each.key].json
  tags        = var.tags
}

resource "aws_iam_policy" "tenant" {
  for_each    = var.tenants
  name        = "${var.name_prefix}-tenant-${each.key}"
  description = "Tollgate tenant ${each.key}: the items of namespaces ${join(", ", each.value.namespace_ids)} of ${var.table_name}"
  policy      = data.aws_iam_policy_document.tenant[each.key].json
  tags        = var.tags
}

data "aws_iam_policy_document" "tenant_assume" {
  for_each = var.tenants

  statement {
    sid     = "TenantAssume"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "AWS"
      identifiers = each.value.principal_arns
    }
  }
}

resource "aws_iam_role" "tenant" {
  for_each             = var.tenants
  name                 = "${var.name_prefix}-tenant-${each.key}"
  description          = "Tollgate tenant ${each.key}"
  assume_role_policy   = data.aws_iam_policy_document.tenant_assume[each.key].json
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy_attachment" "tenant" {
  for_each   = var.tenants
  role       = aws_iam_role.tenant[each.key].name
  policy_arn = aws_iam_policy.tenant[each.key].arn
}
