terraform {
  # Tested (fmt, validate where providers install) with 1.11.
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # The hand-pinned schema subset in testdata is of provider v5.
      version = ">= 5.0, < 6.0"
    }
  }
}
