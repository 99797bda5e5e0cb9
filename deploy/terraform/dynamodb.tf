# The table, as store/dynamodb's CreateTable makes it (docs/dynamodb.md 2):
# string keys PK/SK, four GSIs, a stream with new and old images, TTL on
# "ttl". The tests compare this layout with dynamodb.Layout(), so a change
# in the backend fails them until this file follows. CheckTable refuses a
# table whose keys, indexes or stream differ, and `tollgate deploy` on a
# table created here only writes its schema version record.

locals {
  provisioned = var.billing_mode == "PROVISIONED"

  table_hash_key  = "PK"
  table_range_key = "SK"
  ttl_attribute   = "ttl"

  # Every key attribute of the table and its indexes: all strings.
  key_attributes = ["PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "GSI3PK", "GSI3SK", "GSI4PK", "GSI4SK"]

  # GSI1 parent -> children (ALL); GSI2 resource -> buckets and usage;
  # GSI3 entity -> buckets, leases, resource -> configs; GSI4 namespace ->
  # every item (purge). Only GSI1 projects ALL (docs/dynamodb.md 2.3).
  indexes = {
    GSI1 = { hash_key = "GSI1PK", range_key = "GSI1SK", projection_type = "ALL" }
    GSI2 = { hash_key = "GSI2PK", range_key = "GSI2SK", projection_type = "KEYS_ONLY" }
    GSI3 = { hash_key = "GSI3PK", range_key = "GSI3SK", projection_type = "KEYS_ONLY" }
    GSI4 = { hash_key = "GSI4PK", range_key = "GSI4SK", projection_type = "KEYS_ONLY" }
  }
}

resource "aws_dynamodb_table" "tollgate" {
  name                        = var.table_name
  billing_mode                = var.billing_mode
  hash_key                    = local.table_hash_key
  range_key                   = local.table_range_key
  read_capacity               = local.provisioned ? var.read_capacity : null
  write_capacity              = local.provisioned ? var.write_capacity : null
  stream_enabled              = true
  stream_view_type            = "NEW_AND_OLD_IMAGES"
  deletion_protection_enabled = var.deletion_protection

  dynamic "attribute" {
    for_each = local.key_attributes
    content {
      name = attribute.value
      type = "S"
    }
  }

  dynamic "global_secondary_index" {
    for_each = local.indexes
    content {
      name            = global_secondary_index.key
      hash_key        = global_secondary_index.value.hash_key
      range_key       = global_secondary_index.value.range_key
      projection_type = global_secondary_index.value.projection_type
      read_capacity   = local.provisioned ? var.index_read_capacity : null
      write_capacity  = local.provisioned ? var.index_write_capacity : null
    }
  }

  ttl {
    attribute_name = local.ttl_attribute
    enabled        = true
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery
  }

  tags = var.tags
}

# The schema version record CreateTable writes after creating the table
# (dynamodb.VersionRecord, dynamodb.SchemaVersion). Without it CheckTable
# refuses the table, so the functions fail at start and `tollgate deploy`
# refuses it too. Written once: `tollgate deploy` of a later Tollgate may
# upgrade it in place, and Terraform must not set it back.
locals {
  schema_version = 2
}

resource "aws_dynamodb_table_item" "schema_version" {
  table_name = aws_dynamodb_table.tollgate.name
  hash_key   = aws_dynamodb_table.tollgate.hash_key
  range_key  = aws_dynamodb_table.tollgate.range_key
  item = jsonencode({
    (local.table_hash_key)  = { S = local.registry_partition_key }
    (local.table_range_key) = { S = "#VERSION" }
    version                 = { N = tostring(local.schema_version) }
  })

  lifecycle {
    ignore_changes = [item]
  }
}
