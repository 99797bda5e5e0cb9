# The server (optional, var.server_image): `tollgate serve` on ECS Fargate
# behind an Application Load Balancer, as the CloudFormation template's
# Server* resources (TestSettingsMatchTemplate compares them). Its task
# role holds the admin persona (aws_iam_policy.admin): it answers admin
# and acquire API keys, read from the table (tollgate keys create), so
# no keys file is mounted. The stack's reconciler function reconciles,
# so the server does not (--reconcile-interval 0).

data "aws_region" "current" {}

data "aws_partition" "current" {}

locals {
  server       = var.server_image == "" ? 0 : 1
  server_name  = "${var.name_prefix}-server"
  server_https = var.load_balancer_certificate_arn != ""
  server_port  = local.server_https ? 443 : 80
  server_command = [
    "serve", "--addr", "0.0.0.0:8080",
    "--store", "dynamodb://${aws_dynamodb_table.tollgate.name}?region=${data.aws_region.current.name}",
    "--store-timeout", "2s", "--reconcile-interval", "0", "--log-format", "json",
  ]
}

resource "aws_cloudwatch_log_group" "server" {
  count             = local.server
  name              = "/ecs/${local.server_name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_ecs_cluster" "server" {
  count = local.server
  name  = local.server_name
  tags  = var.tags

  setting {
    name  = "containerInsights"
    value = "disabled"
  }
}

data "aws_iam_policy_document" "ecs_tasks_assume" {
  statement {
    sid     = "EcsTasksAssume"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

# ECS pulls the image and writes the logs with this role.
resource "aws_iam_role" "server_execution" {
  count                = local.server
  name                 = "${local.server_name}-execution"
  description          = "Tollgate server tasks: ECS pulls the image and writes the logs"
  assume_role_policy   = data.aws_iam_policy_document.ecs_tasks_assume.json
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy_attachment" "server_execution" {
  count      = local.server
  role       = aws_iam_role.server_execution[0].name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}

resource "aws_iam_role" "server_task" {
  count                = local.server
  name                 = "${local.server_name}-task"
  description          = "Tollgate server: the admin persona (it answers admin and acquire API keys)"
  assume_role_policy   = data.aws_iam_policy_document.ecs_tasks_assume.json
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy_attachment" "server_task" {
  count      = local.server
  role       = aws_iam_role.server_task[0].name
  policy_arn = aws_iam_policy.admin.arn
}

resource "aws_ecs_task_definition" "server" {
  count                    = local.server
  family                   = local.server_name
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.server_cpu
  memory                   = var.server_memory
  execution_role_arn       = aws_iam_role.server_execution[0].arn
  task_role_arn            = aws_iam_role.server_task[0].arn
  tags                     = var.tags

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "ARM64"
  }

  container_definitions = jsonencode([{
    name         = "tollgate"
    image        = var.server_image
    essential    = true
    command      = local.server_command
    environment  = [{ name = "TOLLGATE_RETENTION", value = var.usage_retention }]
    portMappings = [{ name = "http", containerPort = 8080, protocol = "tcp" }]
    stopTimeout  = 20
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        "awslogs-group"         = aws_cloudwatch_log_group.server[0].name
        "awslogs-region"        = data.aws_region.current.name
        "awslogs-stream-prefix" = "server"
      }
    }
  }])
}

resource "aws_security_group" "load_balancer" {
  count       = local.server
  name        = "${local.server_name}-lb"
  description = "Tollgate load balancer"
  vpc_id      = var.server_vpc_id
  tags        = var.tags

  ingress {
    description = "the listener"
    protocol    = "tcp"
    from_port   = local.server_port
    to_port     = local.server_port
    cidr_blocks = [var.load_balancer_ingress_cidr]
  }

  egress {
    description = "the server tasks"
    protocol    = "-1"
    from_port   = 0
    to_port     = 0
    cidr_blocks = ["0.0.0.0/0"]
  }
}

resource "aws_security_group" "server" {
  count       = local.server
  name        = local.server_name
  description = "Tollgate server tasks"
  vpc_id      = var.server_vpc_id
  tags        = var.tags

  ingress {
    description     = "the load balancer"
    protocol        = "tcp"
    from_port       = 8080
    to_port         = 8080
    security_groups = [aws_security_group.load_balancer[0].id]
  }

  egress {
    description = "DynamoDB, the image registry, CloudWatch Logs"
    protocol    = "-1"
    from_port   = 0
    to_port     = 0
    cidr_blocks = ["0.0.0.0/0"]
  }
}

resource "aws_lb" "server" {
  count                      = local.server
  name                       = local.server_name
  load_balancer_type         = "application"
  internal                   = var.load_balancer_scheme == "internal"
  subnets                    = length(var.load_balancer_subnet_ids) > 0 ? var.load_balancer_subnet_ids : var.server_subnet_ids
  security_groups            = [aws_security_group.load_balancer[0].id]
  drop_invalid_header_fields = true
  tags                       = var.tags
}

resource "aws_lb_target_group" "server" {
  count                = local.server
  name                 = local.server_name
  target_type          = "ip"
  protocol             = "HTTP"
  port                 = 8080
  vpc_id               = var.server_vpc_id
  deregistration_delay = 20
  tags                 = var.tags

  health_check {
    path                = "/readyz"
    interval            = 10
    timeout             = 5
    healthy_threshold   = 2
    unhealthy_threshold = 3
    matcher             = "200"
  }
}

resource "aws_lb_listener" "server" {
  count             = local.server
  load_balancer_arn = aws_lb.server[0].arn
  port              = local.server_port
  protocol          = local.server_https ? "HTTPS" : "HTTP"
  certificate_arn   = local.server_https ? var.load_balancer_certificate_arn : null
  ssl_policy        = local.server_https ? "ELBSecurityPolicy-TLS13-1-2-2021-06" : null
  tags              = var.tags

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.server[0].arn
  }
}

resource "aws_ecs_service" "server" {
  count                              = local.server
  name                               = local.server_name
  cluster                            = aws_ecs_cluster.server[0].id
  task_definition                    = aws_ecs_task_definition.server[0].arn
  launch_type                        = "FARGATE"
  desired_count                      = var.server_desired_count
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200
  health_check_grace_period_seconds  = 30
  tags                               = var.tags

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = var.server_subnet_ids
    security_groups  = [aws_security_group.server[0].id]
    assign_public_ip = var.server_assign_public_ip
  }

  load_balancer {
    container_name   = "tollgate"
    container_port   = 8080
    target_group_arn = aws_lb_target_group.server[0].arn
  }

  depends_on = [aws_lb_listener.server, aws_iam_role_policy_attachment.server_task]
}

# ---------------------------------------------------------------- server alarms

locals {
  server_alarms = local.server == 0 || !var.alarms_enabled ? {} : {
    "server-errors" = {
      metric      = "HTTPCode_Target_5XX_Count"
      statistic   = "Sum"
      threshold   = var.alarm_server_errors_threshold
      target      = true
      description = "The Tollgate server answers 5xx (503: the table is unavailable or throttled; docs/operations.md, Alarms)."
    }
    "load-balancer-errors" = {
      metric      = "HTTPCode_ELB_5XX_Count"
      statistic   = "Sum"
      threshold   = var.alarm_server_errors_threshold
      target      = false
      description = "The load balancer answers 5xx itself (502/503/504: no healthy server task, or tasks failing)."
    }
    "server-latency" = {
      metric      = "TargetResponseTime"
      statistic   = "p99"
      threshold   = var.alarm_server_latency_seconds
      target      = true
      description = "The Tollgate server's p99 response time is above alarm_server_latency_seconds (the table slow or throttled, or the tasks short of CPU)."
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "server" {
  for_each            = local.server_alarms
  alarm_name          = "${var.name_prefix}-${each.key}"
  alarm_description   = each.value.description
  namespace           = "AWS/ApplicationELB"
  metric_name         = each.value.metric
  statistic           = each.value.statistic == "p99" ? null : each.value.statistic
  extended_statistic  = each.value.statistic == "p99" ? each.value.statistic : null
  period              = var.alarm_period_seconds
  evaluation_periods  = var.alarm_evaluation_periods
  datapoints_to_alarm = var.alarm_datapoints_to_alarm
  comparison_operator = "GreaterThanThreshold"
  threshold           = each.value.threshold
  treat_missing_data  = "notBreaching"
  dimensions = merge(
    { LoadBalancer = aws_lb.server[0].arn_suffix },
    each.value.target ? { TargetGroup = aws_lb_target_group.server[0].arn_suffix } : {},
  )
  alarm_actions = local.alarm_actions
  ok_actions    = local.alarm_actions
  tags          = var.tags
}
