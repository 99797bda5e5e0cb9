# Tollgate on AWS: the table, the aggregator and reconciler functions,
# alarms to a new SNS topic, an admin role and two tenants' roles.
#
#   make lambda                      # at the repository root
#   cd deploy/terraform/examples/basic
#   terraform init && terraform apply -var admin_principal_arn=arn:aws:iam::123456789012:role/ops

terraform {
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0, < 6.0"
    }
  }
}

variable "region" {
  description = "The region of the table and functions (the functions must run in the table's region)."
  type        = string
  default     = "eu-west-1"
}

variable "admin_principal_arn" {
  description = "Who may assume the admin role (e.g. an SSO role of the operators)."
  type        = string
}

provider "aws" {
  region = var.region

  default_tags {
    tags = {
      application = "tollgate"
    }
  }
}

module "tollgate" {
  source = "../.."

  name_prefix     = "tollgate-prod"
  table_name      = "tollgate-prod"
  lambda_zip_path = "${path.root}/../../../../dist/tollgate-lambda.zip"

  # Provisioned capacity instead of on-demand, for a steady load; point-in-time recovery on.
  billing_mode           = "PROVISIONED"
  read_capacity          = 50
  write_capacity         = 200
  index_read_capacity    = 5
  index_write_capacity   = 20
  point_in_time_recovery = true

  log_retention_days = 14

  create_alarm_topic                 = true
  alarm_iterator_age_ms              = 120000
  alarm_throttled_requests_threshold = 10

  permissions_boundary_arn = null
  admin_principal_arns     = [var.admin_principal_arn]

  # Namespace ids (tollgate namespace show NAME), not names.
  tenants = {
    checkout = {
      namespace_ids  = ["3f9a0c1d2e4b5a67"]
      principal_arns = ["arn:aws:iam::123456789012:role/checkout-service"]
    }
    search = {
      namespace_ids  = ["8b1e2d3c4f5a6b70", "9c2f3e4d5a6b7c81"]
      principal_arns = ["arn:aws:iam::123456789012:role/search-service"]
    }
  }

  tags = {
    environment = "prod"
  }
}

output "table_name" {
  value = module.tollgate.table_name
}

output "admin_role_arn" {
  value = module.tollgate.admin_role_arn
}

output "tenant_role_arns" {
  value = module.tollgate.tenant_role_arns
}

output "alarm_topic_arn" {
  value = module.tollgate.alarm_topic_arn
}
