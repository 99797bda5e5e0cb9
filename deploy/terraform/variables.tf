# ---------------------------------------------------------------- naming

variable "name_prefix" {
  description = "Prefix of every name this module gives (functions, roles, policies, alarms, queue, topic, schedule)."
  type        = string
  default     = "tollgate"
}

variable "tags" {
  description = "Tags for every resource that takes them."
  type        = map(string)
  default     = {}
}

# ---------------------------------------------------------------- table

variable "table_name" {
  description = "The DynamoDB table's name: what TOLLGATE_TABLE, `tollgate --table` and dynamodb.Connect name."
  type        = string
  default     = "tollgate"
}

variable "billing_mode" {
  description = "PAY_PER_REQUEST (the default, what `tollgate deploy` creates) or PROVISIONED (then set the capacities below)."
  type        = string
  default     = "PAY_PER_REQUEST"

  validation {
    condition     = contains(["PAY_PER_REQUEST", "PROVISIONED"], var.billing_mode)
    error_message = "billing_mode must be PAY_PER_REQUEST or PROVISIONED."
  }
}

variable "read_capacity" {
  description = "PROVISIONED only: the table's read capacity units."
  type        = number
  default     = 5
}

variable "write_capacity" {
  description = "PROVISIONED only: the table's write capacity units (every acquire is at least one write: docs/dynamodb.md 5 and 6)."
  type        = number
  default     = 5
}

variable "index_read_capacity" {
  description = "PROVISIONED only: read capacity units of each of the four indexes."
  type        = number
  default     = 1
}

variable "index_write_capacity" {
  description = "PROVISIONED only: write capacity units of each of the four indexes (bucket and usage items write GSI2-GSI4 when created and deleted)."
  type        = number
  default     = 1
}

variable "point_in_time_recovery" {
  description = "Turn on point-in-time recovery of the table."
  type        = bool
  default     = true
}

variable "deletion_protection" {
  description = "Turn on the table's deletion protection."
  type        = bool
  default     = true
}

# ---------------------------------------------------------------- functions

variable "lambda_zip_path" {
  description = "Path of dist/tollgate-lambda.zip as `make lambda` builds it (one executable `bootstrap`, linux/arm64)."
  type        = string
}

variable "lambda_memory_size" {
  description = "Memory of the aggregator and reconciler functions, in MB (docs/aggregator.md: 128 to 256)."
  type        = number
  default     = 256
}

variable "lambda_timeout" {
  description = "Timeout of the aggregator and reconciler functions, in seconds."
  type        = number
  default     = 60
}

variable "usage_retention" {
  description = "TOLLGATE_RETENTION: how long usage snapshots are kept after their window ends, a Go duration (no day unit)."
  type        = string
  default     = "2160h"

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(h|m|s|ms))+$", var.usage_retention))
    error_message = "usage_retention must be a Go duration such as 2160h."
  }
}

variable "upkeep" {
  description = "TOLLGATE_UPKEEP: whether the aggregator splits hot buckets."
  type        = bool
  default     = true
}

variable "aggregator_reconcile_interval" {
  description = "TOLLGATE_RECONCILE_INTERVAL of the aggregator: also end expired durable leases after a batch this often (a Go duration; \"0\" turns it off)."
  type        = string
  default     = "1m"

  validation {
    condition     = can(regex("^(0|([0-9]+(\\.[0-9]+)?(h|m|s|ms))+)$", var.aggregator_reconcile_interval))
    error_message = "aggregator_reconcile_interval must be a Go duration such as 1m, or 0."
  }
}

variable "reconciler_enabled" {
  description = "Deploy the reconciler: the same zip with TOLLGATE_MODE=reconcile, invoked by an EventBridge schedule, so that expired durable leases end without stream traffic too."
  type        = bool
  default     = true
}

variable "reconcile_schedule" {
  description = "EventBridge schedule expression of the reconciler."
  type        = string
  default     = "rate(1 minute)"
}

variable "log_retention_days" {
  description = "Retention of the functions' log groups, in days (a value CloudWatch Logs accepts; 0: never expire)."
  type        = number
  default     = 30

  validation {
    condition     = contains([0, 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of the values CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90, ...)."
  }
}

# ---------------------------------------------------------------- stream -> aggregator

variable "stream_batch_size" {
  description = "Records per batch handed to the aggregator (at most 10000)."
  type        = number
  default     = 1000
}

variable "stream_batching_window_seconds" {
  description = "How long Lambda gathers records before invoking the aggregator."
  type        = number
  default     = 1
}

variable "stream_tumbling_window_seconds" {
  description = "The tumbling window: required (only its events name the stream shard; docs/aggregator.md). 1 to 900."
  type        = number
  default     = 900

  validation {
    condition     = var.stream_tumbling_window_seconds >= 1 && var.stream_tumbling_window_seconds <= 900
    error_message = "The aggregator refuses batches without a tumbling window: stream_tumbling_window_seconds must be 1 to 900."
  }
}

variable "stream_parallelization_factor" {
  description = "Concurrent batches per stream shard (1 to 10)."
  type        = number
  default     = 1
}

variable "stream_maximum_retry_attempts" {
  description = "Retries of a failing batch before Lambda discards it to the failure queue (-1: until its records leave the stream, 24 hours). A discarded batch's usage is never counted."
  type        = number
  default     = 100
}

variable "stream_maximum_record_age_seconds" {
  description = "Records older than this are discarded to the failure queue (-1: never, i.e. the stream's 24 hours)."
  type        = number
  default     = -1
}

# ---------------------------------------------------------------- IAM

variable "permissions_boundary_arn" {
  description = "Permissions boundary for every role this module creates (null: none)."
  type        = string
  default     = null
}

variable "admin_principal_arns" {
  description = "Principals that may assume the admin role (namespace registration and purge, table management). Empty: the admin policy is created, no role."
  type        = list(string)
  default     = []
}

variable "tenants" {
  description = <<-EOT
    One role per tenant, confined to its namespaces' items by dynamodb:LeadingKeys
    (docs/dynamodb.md 7). namespace_ids are namespace ids (16 hex characters, from
    `tollgate namespace show`), not names; principal_arns may assume the role.
  EOT
  type = map(object({
    namespace_ids  = list(string)
    principal_arns = list(string)
  }))
  default = {}

  validation {
    condition = alltrue([
      for t in values(var.tenants) :
      length(t.namespace_ids) > 0 && length(t.principal_arns) > 0 &&
      alltrue([for id in t.namespace_ids : can(regex("^[0-9a-f]{16}$", id))])
    ])
    error_message = "Each tenant needs at least one principal and one namespace id, and a namespace id is 16 lowercase hex characters (the id, not the name)."
  }
}

# ---------------------------------------------------------------- alarms

variable "alarms_enabled" {
  description = "Create the CloudWatch alarms."
  type        = bool
  default     = true
}

variable "create_alarm_topic" {
  description = "Create an SNS topic for the alarms (its ARN is an output). Otherwise alarm_topic_arn, if set, receives them."
  type        = bool
  default     = false
}

variable "alarm_topic_arn" {
  description = "An existing SNS topic for the alarms, when create_alarm_topic is false (null: the alarms notify nobody)."
  type        = string
  default     = null
}

variable "alarm_period_seconds" {
  description = "The period of every alarm, in seconds."
  type        = number
  default     = 60
}

variable "alarm_evaluation_periods" {
  description = "Periods an alarm's condition must hold before it fires."
  type        = number
  default     = 5
}

variable "alarm_datapoints_to_alarm" {
  description = "Of the alarm_evaluation_periods, how many must breach for an alarm on a count (throttles, errors) to fire; the iterator age alarm needs them all."
  type        = number
  default     = 3
}

variable "alarm_throttled_requests_threshold" {
  description = "Throttled DynamoDB requests per period (all the operations Tollgate calls) above which the alarm fires."
  type        = number
  default     = 0
}

variable "alarm_system_errors_threshold" {
  description = "DynamoDB system errors per period above which the alarm fires."
  type        = number
  default     = 0
}

variable "alarm_iterator_age_ms" {
  description = "The aggregator's stream iterator age, in milliseconds, above which the alarm fires (usage is that late)."
  type        = number
  default     = 300000
}

variable "alarm_lambda_errors_threshold" {
  description = "Errors per period of a function above which its alarm fires."
  type        = number
  default     = 0
}

variable "alarm_lambda_throttles_threshold" {
  description = "Throttled invocations per period of a function above which its alarm fires."
  type        = number
  default     = 0
}

# ---------------------------------------------------------------- server (optional)

variable "server_image" {
  description = "Optional: the container image of `tollgate serve` (make image, pushed to a registry the tasks can pull from, e.g. ECR). Set, the module adds the server: an ECS Fargate service behind an Application Load Balancer (docs/operations.md, 1.6). Needs server_vpc_id and server_subnet_ids, and an API key in the table before the tasks start."
  type        = string
  default     = ""
}

variable "server_vpc_id" {
  description = "server_image only: the VPC of the server's tasks and load balancer."
  type        = string
  default     = ""
}

variable "server_subnet_ids" {
  description = "server_image only: the subnets of the server's tasks (two or more, in different availability zones)."
  type        = list(string)
  default     = []
}

variable "load_balancer_subnet_ids" {
  description = "server_image only: the subnets of the load balancer (public ones when internet-facing); empty: server_subnet_ids."
  type        = list(string)
  default     = []
}

variable "load_balancer_scheme" {
  description = "server_image only: internet-facing, or internal (reachable from the VPC only)."
  type        = string
  default     = "internet-facing"

  validation {
    condition     = contains(["internet-facing", "internal"], var.load_balancer_scheme)
    error_message = "load_balancer_scheme must be internet-facing or internal."
  }
}

variable "load_balancer_ingress_cidr" {
  description = "server_image only: the addresses allowed to reach the load balancer's listener."
  type        = string
  default     = "0.0.0.0/0"
}

variable "load_balancer_certificate_arn" {
  description = "server_image only: an ACM certificate; set, the listener is HTTPS on 443, otherwise HTTP on 80 (API keys then cross the network in clear)."
  type        = string
  default     = ""
}

variable "server_assign_public_ip" {
  description = "server_image only: true when the tasks' subnets are public and have no NAT gateway (to pull the image and reach DynamoDB)."
  type        = bool
  default     = false
}

variable "server_cpu" {
  description = "server_image only: CPU units of each task (1024 = one vCPU): 256, 512, 1024, 2048 or 4096."
  type        = number
  default     = 512
}

variable "server_memory" {
  description = "server_image only: memory of each task, MiB (a size Fargate allows with server_cpu)."
  type        = number
  default     = 1024
}

variable "server_desired_count" {
  description = "server_image only: how many tasks run (0 stops them, e.g. until an API key exists)."
  type        = number
  default     = 2
}

variable "alarm_server_errors_threshold" {
  description = "server_image only: alarm when the server or the load balancer answer more 5xx than this per period."
  type        = number
  default     = 5
}

variable "alarm_server_latency_seconds" {
  description = "server_image only: alarm when the p99 of the server's response time is above this, seconds."
  type        = number
  default     = 0.25
}

# ---------------------------------------------------------------- events function (optional)

variable "events_rules" {
  description = "Optional: the events function's rules file (package events) as text, e.g. file(\"rules.yaml\"). Set, the module adds the events function and an EventBridge rule per source and detail-type the rules match."
  type        = string
  default     = ""
}

variable "events_namespace" {
  description = "events_rules only: the namespace whose reservations the events function releases (\"\": the default namespace)."
  type        = string
  default     = ""
}
