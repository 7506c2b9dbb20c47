"""The functions that run the commands which need TensorFlow: `run_<command>(args)`, one
module per parser module of `zoo.cli`, imported by `zoo.cli.main` (its `COMMANDS` table) only
when the command runs."""
