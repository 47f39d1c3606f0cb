return "€"
