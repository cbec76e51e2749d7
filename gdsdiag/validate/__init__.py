"""gdsdiag validate: policy, rules, runner and outputs of the pre-deployment gate."""
