module certctl.io/examples/webhook

go 1.26.0
