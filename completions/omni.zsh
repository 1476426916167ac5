
#compdef omni

_omni_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _OMNI_COMPLETE=complete_zsh omni)
}

compdef _omni_completion omni

