const = ;
