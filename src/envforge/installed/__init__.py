"""What a site-packages holds: installed distributions (dist-info, RECORD) and editable installs (PEP 610)."""
