"""What every command's options share, kept out of ``stream_dp.commands`` so that a command's
help imports no other command: the parser that suggests the option meant, and how a setting
is shown as an option (its metavar and default)."""
